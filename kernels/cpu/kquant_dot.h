// Row kernels (see dot.h) for the Q5, K-quant, IQ4 and MXFP4 types of
// kernels/math/kquant_blocks.h, one template over the block type per ISA.
// Each sub-block of 32 is unpacked with the shared math (codes, scale and
// offset per half), decoded exactly to f32 in vector registers
// (scale * code + offset, one rounding) and multiplied with x in f32.
// The row_kernels() of each ISA (dot_*.cpp) falls through to these.
#pragma once

#include "kernels/cpu/dot.h"
#include "kernels/math/kquant_types.h"

namespace layerstream::kernels::cpu {

// An ISA's kquant_row_kernels(): make(math::BlockTag<Block>{}) builds the
// RowKernels of block type Block; {nullptr, nullptr} for a type outside
// kquant_blocks.h.
template <typename Make>
RowKernels kquant_row_kernels_from(GgmlType type, Make&& make) {
  RowKernels k{nullptr, nullptr};
  math::visit_kquant_type(type, [&](auto tag) { k = make(tag); });
  return k;
}

namespace generic {
RowKernels kquant_row_kernels(GgmlType type);  // {nullptr, nullptr} for other types
}
namespace avx2 {
RowKernels kquant_row_kernels(GgmlType type);  // REQUIRES avx2::supported()
}
namespace avx512 {
RowKernels kquant_row_kernels(GgmlType type);  // REQUIRES avx512::supported()
}
}  // namespace layerstream::kernels::cpu

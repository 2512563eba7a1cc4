// Portable row kernels for the kquant_blocks.h types: decode a block with the
// shared math, then the dense dot.
#include <cstring>

#include "kernels/cpu/kquant_dot.h"
#include "kernels/math/kquant_types.h"

namespace layerstream::kernels::cpu::generic {
namespace {

template <typename Block>
void decode(const void* row, int64_t first, int64_t n, float* out) {
  const auto* blocks = static_cast<const Block*>(row) + first / Block::kElems;
  for (int64_t b = 0; b < n / Block::kElems; ++b) {
    Block blk;
    std::memcpy(&blk, blocks + b, sizeof(Block));
    math::dequantize_kblock(blk, out + b * Block::kElems);
  }
}

template <typename Block>
float dot(const void* row, const float* x, int64_t n) {
  float buf[Block::kElems];
  float sum = 0;
  for (int64_t i = 0; i < n; i += Block::kElems) {
    decode<Block>(row, i, Block::kElems, buf);
    sum += dot_f32(buf, x + i, Block::kElems);
  }
  return sum;
}

}  // namespace

RowKernels kquant_row_kernels(GgmlType type) {
  return kquant_row_kernels_from(type, []<class B>(math::BlockTag<B>) { return RowKernels{dot<B>, decode<B>}; });
}

}  // namespace layerstream::kernels::cpu::generic

// GgmlType -> block struct of kquant_blocks.h, for the kernels that are one
// template over the block type (CPU row kernels, CUDA matvec and dequantise).
#pragma once

#include <utility>

#include "kernels/math/ggml_type.h"
#include "kernels/math/kquant_blocks.h"

namespace layerstream::math {

template <typename Block>
struct BlockTag {
  using type = Block;
};

// Calls fn(BlockTag<Block>{}) when `t` is one of the types of
// kquant_blocks.h and returns true; false (fn not called) otherwise.
template <typename Fn>
bool visit_kquant_type(GgmlType t, Fn&& fn) {
  switch (t) {
    case GgmlType::Q5_0: fn(BlockTag<BlockQ5_0>{}); return true;
    case GgmlType::Q5_1: fn(BlockTag<BlockQ5_1>{}); return true;
    case GgmlType::Q2_K: fn(BlockTag<BlockQ2_K>{}); return true;
    case GgmlType::Q3_K: fn(BlockTag<BlockQ3_K>{}); return true;
    case GgmlType::Q4_K: fn(BlockTag<BlockQ4_K>{}); return true;
    case GgmlType::Q5_K: fn(BlockTag<BlockQ5_K>{}); return true;
    case GgmlType::Q6_K: fn(BlockTag<BlockQ6_K>{}); return true;
    case GgmlType::IQ4_NL: fn(BlockTag<BlockIQ4_NL>{}); return true;
    case GgmlType::IQ4_XS: fn(BlockTag<BlockIQ4_XS>{}); return true;
    case GgmlType::MXFP4: fn(BlockTag<BlockMXFP4>{}); return true;
    default: return false;
  }
}

}  // namespace layerstream::math

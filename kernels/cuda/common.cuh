// Device helpers shared by the .cu files: warp reductions and row decoders.
#pragma once

#include <cstdint>

#include "kernels/math/fp16.h"
#include "kernels/math/quant_blocks.h"

namespace layerstream::kernels::cuda {

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

// Element i of a row of GGUF type id T (F32 = 0, F16 = 1, BF16 = 30; the
// block types are decoded with the shared math in whole blocks instead).
template <int T>
__device__ __forceinline__ float load_elem(const void* row, int64_t i);
template <>
__device__ __forceinline__ float load_elem<0>(const void* row, int64_t i) {
  return static_cast<const float*>(row)[i];
}
template <>
__device__ __forceinline__ float load_elem<1>(const void* row, int64_t i) {
  return math::f16_to_f32(static_cast<const uint16_t*>(row)[i]);
}
template <>
__device__ __forceinline__ float load_elem<30>(const void* row, int64_t i) {
  return math::bf16_to_f32(static_cast<const uint16_t*>(row)[i]);
}

// Decodes element j of block b of a row of block type Block.
template <typename Block>
__device__ __forceinline__ float block_elem(const void* row, int64_t b, int j);
template <>
__device__ __forceinline__ float block_elem<math::BlockQ8_0>(const void* row, int64_t b, int j) {
  return math::q8_0_value(static_cast<const math::BlockQ8_0*>(row)[b], j);
}
template <>
__device__ __forceinline__ float block_elem<math::BlockQ4_0>(const void* row, int64_t b, int j) {
  return math::q4_0_value(static_cast<const math::BlockQ4_0*>(row)[b], j);
}
template <>
__device__ __forceinline__ float block_elem<math::BlockQ4_1>(const void* row, int64_t b, int j) {
  return math::q4_1_value(static_cast<const math::BlockQ4_1*>(row)[b], j);
}

inline unsigned grid_for(int64_t n, int block) { return static_cast<unsigned>((n + block - 1) / block); }

}  // namespace layerstream::kernels::cuda

// Device helpers shared by the .cu files: warp reductions, row decoders and
// the embedding and matvec launch shapes.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/kernels.h"
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

// One warp per output row: warp-sums each token's partial sum (lanes hold
// acc[t] for t < n_tok) and lane 0 stores y[t][o].
template <int kMaxTok>
__device__ __forceinline__ void store_warp_sums(float (&acc)[kMaxTok], int n_tok, float* y, int64_t n_out, int64_t o) {
#pragma unroll
  for (int t = 0; t < kMaxTok; ++t) {
    if (t < n_tok) {
      const float v = warp_sum(acc[t]);
      if ((threadIdx.x & 31) == 0) y[t * n_out + o] = v;
    }
  }
}

// Row decoders: Decoder::decode(row, c, out) writes the Decoder::kChunk
// elements of chunk c of a row (embedding_kernel, matvec_kernel).
template <int T>  // F32, F16, BF16 (load_elem)
struct DenseDecoder {
  static constexpr int kChunk = 1;
  __device__ __forceinline__ static void decode(const void* row, int64_t i, float* out) {
    out[0] = load_elem<T>(row, i);
  }
};
template <typename Block>  // Q8_0, Q4_0, Q4_1, an element at a time (block_elem)
struct BlockDecoder {
  static constexpr int kChunk = 1;
  __device__ __forceinline__ static void decode(const void* row, int64_t c, float* out) {
    out[0] = block_elem<Block>(row, c / math::kQK, static_cast<int>(c % math::kQK));
  }
};
template <typename Block>  // Q8_0, Q4_0, Q4_1, a whole block at a time
struct WholeBlockDecoder {
  static constexpr int kChunk = math::kQK;
  __device__ __forceinline__ static void decode(const void* row, int64_t c, float* out) {
    math::dequantize_block(static_cast<const Block*>(row)[c], out);
  }
};

// One warp per output row (kWarps rows per thread block); lanes stride over
// the row's chunks, each decoded once for all n_tok (<= kMaxTok) tokens.
template <typename Decoder, int kWarps, int kMaxTok>
__global__ void matvec_kernel(const void* w, int64_t n_out, int64_t n_in, int64_t row_bytes, const float* x, int n_tok,
                              float* y) {
  constexpr int kChunk = Decoder::kChunk;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (o >= n_out) return;
  const void* row = static_cast<const uint8_t*>(w) + o * row_bytes;
  float acc[kMaxTok] = {};
  for (int64_t c = threadIdx.x & 31; c < n_in / kChunk; c += 32) {
    float dec[kChunk];
    Decoder::decode(row, c, dec);
#pragma unroll
    for (int t = 0; t < kMaxTok; ++t) {
      if (t >= n_tok) continue;
      const float* xt = x + t * n_in + c * kChunk;
      if constexpr (kChunk == 1) {
        acc[t] += dec[0] * xt[0];
      } else {  // the chunk's dot first, then into the token's sum
        float s = 0;
#pragma unroll
        for (int j = 0; j < kChunk; ++j) s += dec[j] * xt[j];
        acc[t] += s;
      }
    }
  }
  store_warp_sums(acc, n_tok, y, n_out, o);
}

// The matvec kernels' signature: (w, n_out, n_in, row_bytes, x, n_tok, y),
// one warp per output row.
using MatvecKernel = void (*)(const void*, int64_t, int64_t, int64_t, const float*, int, float*);

// Launches `kernel` (warps_per_block rows per thread block) on tokens
// [first_token, first_token + n_tok) of p.
inline void launch_matvec_kernel(MatvecKernel kernel, int warps_per_block, const MatmulParams& p, int64_t first_token,
                                 int n_tok, cudaStream_t s) {
  const int64_t rb = static_cast<int64_t>(ggml_row_bytes(ggml_type_traits(p.w_type), p.n_in));
  kernel<<<grid_for(p.n_out, warps_per_block), 32 * warps_per_block, 0, s>>>(
      p.w, p.n_out, p.n_in, rb, p.x + first_token * p.n_in, n_tok, p.y + first_token * p.n_out);
}

// One block per token; threads stride over the row's chunks. Bad ids give a NaN row.
template <typename Decoder>
__global__ void embedding_kernel(const void* table, int64_t n_vocab, int64_t n_embd, const int32_t* tokens,
                                 float* out, int64_t row_bytes) {
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  float* o = out + t * n_embd;
  const bool ok = id >= 0 && id < n_vocab;
  const void* row = static_cast<const uint8_t*>(table) + (ok ? id : 0) * row_bytes;
  for (int64_t c = threadIdx.x; c < n_embd / Decoder::kChunk; c += blockDim.x) {
    float dec[Decoder::kChunk];
    Decoder::decode(row, c, dec);
    for (int j = 0; j < Decoder::kChunk; ++j) o[c * Decoder::kChunk + j] = ok ? dec[j] : NAN;
  }
}

template <typename Decoder>
void launch_embedding_kernel(const EmbeddingParams& p, int threads, cudaStream_t s) {
  const int64_t rb = static_cast<int64_t>(ggml_row_bytes(ggml_type_traits(p.type), p.n_embd));
  embedding_kernel<Decoder>
      <<<static_cast<unsigned>(p.n_tokens), threads, 0, s>>>(p.table, p.n_vocab, p.n_embd, p.tokens, p.out, rb);
}

}  // namespace layerstream::kernels::cuda

// CUDA kernels for the kquant_blocks.h types (see kquant.h).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kquant.h"
#include "kernels/cuda/launchers.h"
#include "kernels/math/kquant_types.h"

namespace layerstream::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxTok = static_cast<int>(kMatvecMaxTokens);

// Sub-block u (32 elements) of a row of Block, decoded into out[32].
template <typename Block>
__device__ __forceinline__ void decode_sub(const void* row, int64_t u, float* out) {
  constexpr int kSubs = Block::kElems / 32;
  const Block& b = static_cast<const Block*>(row)[u / kSubs];
  math::dequantize_sub(b, static_cast<int>(u % kSubs), out);
}

// One warp per output row; lanes stride over the row's sub-blocks, each
// decoded once for all tokens of the batch.
template <typename Block>
__global__ void kquant_matvec_kernel(const void* w, int64_t n_out, int64_t n_in, int64_t row_bytes, const float* x,
                                     int n_tok, float* y) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (o >= n_out) return;
  const void* row = static_cast<const uint8_t*>(w) + o * row_bytes;
  float acc[kMaxTok] = {};
  for (int64_t u = threadIdx.x & 31; u < n_in / 32; u += 32) {
    float dec[32];
    decode_sub<Block>(row, u, dec);
#pragma unroll
    for (int t = 0; t < kMaxTok; ++t) {
      if (t < n_tok) {
        const float* xt = x + t * n_in + u * 32;
        float s = 0;
#pragma unroll
        for (int j = 0; j < 32; ++j) s += dec[j] * xt[j];
        acc[t] += s;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kMaxTok; ++t) {
    if (t < n_tok) {
      const float v = warp_sum(acc[t]);
      if ((threadIdx.x & 31) == 0) y[t * n_out + o] = v;
    }
  }
}

// One thread per sub-block of the whole matrix.
template <typename Block>
__global__ void kquant_dequant_16_kernel(const void* w, int64_t n_out, int64_t n_in, int64_t row_bytes, bool to_bf16,
                                         uint16_t* out) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t subs_per_row = n_in / 32;
  if (idx >= n_out * subs_per_row) return;
  const int64_t o = idx / subs_per_row, u = idx % subs_per_row;
  float dec[32];
  decode_sub<Block>(static_cast<const uint8_t*>(w) + o * row_bytes, u, dec);
  uint16_t* dst = out + o * n_in + u * 32;
#pragma unroll
  for (int j = 0; j < 32; ++j) dst[j] = to_bf16 ? math::f32_to_bf16(dec[j]) : math::f32_to_f16(dec[j]);
}

// One block per token; threads stride over the row's sub-blocks. Bad ids give a NaN row.
template <typename Block>
__global__ void kquant_embedding_kernel(const void* table, int64_t n_vocab, int64_t n_embd, const int32_t* tokens,
                                        float* out, int64_t row_bytes) {
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  float* o = out + t * n_embd;
  const bool ok = id >= 0 && id < n_vocab;
  const void* row = static_cast<const uint8_t*>(table) + (ok ? id : 0) * row_bytes;
  for (int64_t u = threadIdx.x; u < n_embd / 32; u += blockDim.x) {
    float dec[32];
    decode_sub<Block>(row, u, dec);
    for (int j = 0; j < 32; ++j) o[u * 32 + j] = ok ? dec[j] : NAN;
  }
}

Status not_kquant(const char* op, GgmlType t) {
  return Status::Unsupported(std::string("cuda ") + op + ": unsupported type " + ggml_type_traits(t).name);
}

}  // namespace

bool is_kquant_type(GgmlType t) {
  return math::visit_kquant_type(t, [](auto) {});
}

Status launch_kquant_matvec(const MatmulParams& p, int64_t first_token, int n_tok, cudaStream_t s) {
  const int64_t rb = static_cast<int64_t>(ggml_row_bytes(ggml_type_traits(p.w_type), p.n_in));
  const float* x = p.x + first_token * p.n_in;
  float* y = p.y + first_token * p.n_out;
  const unsigned grid = grid_for(p.n_out, kWarpsPerBlock);
  const bool known = math::visit_kquant_type(p.w_type, [&](auto tag) {
    using Block = typename decltype(tag)::type;
    kquant_matvec_kernel<Block><<<grid, 32 * kWarpsPerBlock, 0, s>>>(p.w, p.n_out, p.n_in, rb, x, n_tok, y);
  });
  if (!known) return not_kquant("matvec", p.w_type);
  LS_CUDA_CHECK_LAUNCH("kquant_matvec");
  return Status::OK();
}

Status launch_kquant_dequant_16(const void* w, GgmlType type, int64_t n_out, int64_t n_in, bool to_bf16, uint16_t* w16,
                                cudaStream_t s) {
  const int64_t rb = static_cast<int64_t>(ggml_row_bytes(ggml_type_traits(type), n_in));
  const int64_t n_subs = n_out * (n_in / 32);
  const bool known = math::visit_kquant_type(type, [&](auto tag) {
    using Block = typename decltype(tag)::type;
    kquant_dequant_16_kernel<Block><<<grid_for(n_subs, 256), 256, 0, s>>>(w, n_out, n_in, rb, to_bf16, w16);
  });
  if (!known) return not_kquant("dequantise", type);
  LS_CUDA_CHECK_LAUNCH("kquant_dequant_16");
  return Status::OK();
}

Status launch_kquant_embedding(const EmbeddingParams& p, cudaStream_t s) {
  const int64_t rb = static_cast<int64_t>(ggml_row_bytes(ggml_type_traits(p.type), p.n_embd));
  const unsigned grid = static_cast<unsigned>(p.n_tokens);
  const bool known = math::visit_kquant_type(p.type, [&](auto tag) {
    using Block = typename decltype(tag)::type;
    kquant_embedding_kernel<Block><<<grid, 128, 0, s>>>(p.table, p.n_vocab, p.n_embd, p.tokens, p.out, rb);
  });
  if (!known) return not_kquant("embedding", p.type);
  LS_CUDA_CHECK_LAUNCH("kquant_embedding");
  return Status::OK();
}

}  // namespace layerstream::kernels::cuda

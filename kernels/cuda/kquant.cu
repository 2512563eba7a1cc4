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

// embedding_kernel's decoder: a sub-block of 32 at a time.
template <typename Block>
struct SubBlockDecoder {
  static constexpr int kChunk = 32;
  __device__ __forceinline__ static void decode(const void* row, int64_t u, float* out) {
    decode_sub<Block>(row, u, out);
  }
};

Status not_kquant(const char* op, GgmlType t) {
  return Status::Unsupported(std::string("cuda ") + op + ": unsupported type " + ggml_type_traits(t).name);
}

}  // namespace

bool is_kquant_type(GgmlType t) {
  return math::visit_kquant_type(t, [](auto) {});
}

Status launch_kquant_matvec(const MatmulParams& p, int64_t first_token, int n_tok, cudaStream_t s) {
  MatvecKernel kernel = nullptr;
  math::visit_kquant_type(p.w_type, [&](auto tag) {
    kernel = matvec_kernel<SubBlockDecoder<typename decltype(tag)::type>, kWarpsPerBlock, kMaxTok>;
  });
  if (!kernel) return not_kquant("matvec", p.w_type);
  launch_matvec_kernel(kernel, kWarpsPerBlock, p, first_token, n_tok, s);
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
  const bool known = math::visit_kquant_type(
      p.type, [&](auto tag) { launch_embedding_kernel<SubBlockDecoder<typename decltype(tag)::type>>(p, 128, s); });
  if (!known) return not_kquant("embedding", p.type);
  LS_CUDA_CHECK_LAUNCH("kquant_embedding");
  return Status::OK();
}

}  // namespace layerstream::kernels::cuda

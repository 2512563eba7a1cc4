// Launchers of the CUDA kernels: raw pointers from the params structs, a
// stream, a Status. Each launch is followed by LS_CUDA_CHECK_LAUNCH.
// Params must already pass validate() (kernels/kernels.h).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <vector>

#include "kernels/kernels.h"

namespace layerstream::kernels::cuda {

// Batches up to this many tokens use the own matmul kernel; larger ones cuBLAS.
constexpr int64_t kMatvecMaxTokens = 8;
// The matvec kernels sum each token as a one-token launch does: what makes
// CUDA passes of up to kBatchInvariantTokens batch-invariant.
static_assert(kMatvecMaxTokens >= kBatchInvariantTokens);

Status launch_embedding(const EmbeddingParams& p, cudaStream_t s);
Status launch_rmsnorm(const RmsNormParams& p, cudaStream_t s);
Status launch_rope(const RopeParams& p, cudaStream_t s);
Status launch_silu_mul(const SiluMulParams& p, cudaStream_t s);
Status launch_gelu_mul(const GeluMulParams& p, cudaStream_t s);
Status launch_scale(const ScaleParams& p, cudaStream_t s);
Status launch_add(const AddParams& p, cudaStream_t s);
Status launch_attention(const AttentionParams& p, cudaStream_t s);
// cuBLAS when n_tokens > kMatvecMaxTokens (and, for non-F32 weights, enough
// scratch); the own dequantise-in-registers kernel otherwise.
uint64_t matmul_scratch_bytes(GgmlType w_type, int64_t n_out, int64_t n_in, int64_t n_tokens);
Status launch_matmul(const MatmulParams& p, cublasHandle_t cublas, cudaStream_t s);
// Coalesced Q8_0/Q4_0/Q4_1 matvec (matvec_quarter.cu): four lanes per block.
// Applies to those types when x is 16-byte aligned; launch_matmul uses it then.
bool matvec_quarter_applies(GgmlType t, const float* x);
Status launch_matvec_quarter(const MatmulParams& p, int64_t first_token, int n_tok, cudaStream_t s);
// The lane-per-block matvec for any n_tokens (launch_matmul's fallback), for
// benchmarks that compare it with the coalesced one in the same binary.
Status launch_matvec_lane_per_block(const MatmulParams& p, cudaStream_t s);
// The host side of a MoE FFN's routing (moe.cu): reused between calls.
struct MoeHostRouting {
  std::vector<float> logits, weights, row_weights;
  std::vector<int32_t> ids, expert_start, rows;
};
// The mixture-of-experts FFN (moe.cu); synchronises s once to route on the host.
Status launch_moe_ffn(const MoeFfnParams& p, MoeHostRouting& host, cublasHandle_t cublas, cudaStream_t s);
// Greedy: index of the largest logit (lowest on ties) into *out_device.
Status launch_argmax(const float* logits, int64_t n, int32_t* out_device, cudaStream_t s);

}  // namespace layerstream::kernels::cuda

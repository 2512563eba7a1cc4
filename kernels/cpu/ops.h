// The CPU kernels as plain functions: they run on the calling thread and
// spread rows over `pool` (null: single-threaded). Params are those of
// kernels/kernels.h and must already pass validate(); pointers are host
// memory. CpuKernels enqueues these on a Stream; tests call them directly.
#pragma once

#include <cstdint>

#include "kernels/cpu/qdot.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/kernels.h"

namespace layerstream::kernels::cpu {

// InvalidArgument when a token id is outside [0, n_vocab) (names the index and id).
Status embedding(const EmbeddingParams& p, ThreadPool* pool);
void rmsnorm(const RmsNormParams& p, ThreadPool* pool);
void rope(const RopeParams& p, ThreadPool* pool);
// The exact matmul: f32 activations, weights decoded exactly (dot.h).
void matmul(const MatmulParams& p, ThreadPool* pool);
// The fast matmul (qdot.h): activations quantised per block to int8,
// integer dot products on `isa`; weight types without a fast path take the
// exact one. Uses a per-thread scratch for the quantised activations.
// F32/F16/BF16 weights (float types have no int8 path) and n_tokens > 1
// take gemm_f32: rows decoded exactly to f32, register-tiled f32 GEMM.
void matmul_fast(const MatmulParams& p, ThreadPool* pool, CpuIsa isa = CpuIsa::kAuto);
// matmul_fast over n (<= kMaxGroupedMatmuls) matmuls sharing x, n_in and
// n_tokens: the same results; for decode (one token) of types with a fast
// path, x is quantised once and all rows of all n go to the pool as one job.
constexpr int kMaxGroupedMatmuls = 4;
void matmul_fast_group(const MatmulParams* ps, int n, ThreadPool* pool, CpuIsa isa = CpuIsa::kAuto);
// REQUIRES w_type F32, F16 or BF16.
void gemm_f32(const MatmulParams& p, ThreadPool* pool, CpuIsa isa = CpuIsa::kAuto);
void attention(const AttentionParams& p, ThreadPool* pool);
void silu_mul(const SiluMulParams& p, ThreadPool* pool);
void gelu_mul(const GeluMulParams& p, ThreadPool* pool);
void scale(const ScaleParams& p, ThreadPool* pool);
void add(const AddParams& p, ThreadPool* pool);
// The mixture-of-experts FFN (moe.cpp); exact: the experts' matmuls take
// matmul, else matmul_fast (the router always takes matmul).
void moe_ffn(const MoeFfnParams& p, ThreadPool* pool, bool exact);

// The sampler of SampleParams (temperature / top_k / top_p / seed), on a
// host copy of the logits. Returns the token id.
int32_t sample(const float* logits, int64_t n_vocab, float temperature, int32_t top_k, float top_p, uint64_t seed);

}  // namespace layerstream::kernels::cpu

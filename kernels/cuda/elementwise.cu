// CUDA embedding, RMSNorm, RoPE, SiLU-mul, GELU-mul, scale and add, on the shared math.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kquant.h"
#include "kernels/cuda/launchers.h"
#include "kernels/math/activation.h"
#include "kernels/math/rmsnorm.h"
#include "kernels/math/rope.h"

namespace layerstream::kernels::cuda {
namespace {

// One block (256 threads) per row.
__global__ void rmsnorm_kernel(const float* x, const float* w, float* out, int64_t n, float eps) {
  const float* xr = x + blockIdx.x * n;
  float* orow = out + blockIdx.x * n;
  float s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += xr[i] * xr[i];
  __shared__ float partial[32];
  s = warp_sum(s);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.0f;
    v = warp_sum(v);
    if (threadIdx.x == 0) partial[0] = v;
  }
  __syncthreads();
  const float scale = math::rms_inv_scale(partial[0], n, eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) orow[i] = xr[i] * scale * w[i];
}

// One thread per (token, head, pair). low, high, mscale: YaRN's ramp ends and
// magnitude (math::rope_yarn_corr_dims, rope_yarn_mscale), computed once per launch.
__global__ void rope_kernel(RopeParams p, int64_t n_rot, float low, float high, float mscale) {
  const int64_t pairs = n_rot / 2;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= p.n_tokens * p.n_heads * pairs) return;
  const int64_t i = idx % pairs;
  const int64_t th = idx / pairs;  // token * n_heads + head
  const int64_t t = th / p.n_heads;
  int64_t i0, i1;
  math::rope_pair_index(i, n_rot, p.neox, i0, i1);
  float* head = p.x + th * p.head_dim;
  const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
  const float theta =
      math::rope_theta_ext(p.positions[t], i, n_rot, p.freq_base, p.freq_scale, ff, p.ext_factor, low, high);
  math::rope_rotate(head[i0], head[i1], theta, mscale);
}

// The binary elementwise ops: out[i] = Op()(a[i], b[i]), one thread per element.
struct SiluMulOp {
  __device__ __forceinline__ float operator()(float g, float u) const { return math::silu_mul(g, u); }
};
struct GeluMulOp {
  __device__ __forceinline__ float operator()(float g, float u) const { return math::gelu_mul(g, u); }
};
struct AddOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

template <typename Op>
__global__ void binary_kernel(const float* a, const float* b, float* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Op()(a[i], b[i]);
}

template <typename Op>
Status launch_binary(const char* name, const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
  binary_kernel<Op><<<grid_for(n, 256), 256, 0, s>>>(a, b, out, n);
  return check_launch(name, __FILE__, __LINE__);
}

__global__ void scale_kernel(const float* x, float* out, int64_t n, float factor) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * factor;
}

}  // namespace

Status launch_embedding(const EmbeddingParams& p, cudaStream_t s) {
  switch (p.type) {
    case GgmlType::F32: launch_embedding_kernel<DenseDecoder<0>>(p, 256, s); break;
    case GgmlType::F16: launch_embedding_kernel<DenseDecoder<1>>(p, 256, s); break;
    case GgmlType::BF16: launch_embedding_kernel<DenseDecoder<30>>(p, 256, s); break;
    case GgmlType::Q8_0: launch_embedding_kernel<BlockDecoder<math::BlockQ8_0>>(p, 256, s); break;
    case GgmlType::Q4_0: launch_embedding_kernel<BlockDecoder<math::BlockQ4_0>>(p, 256, s); break;
    case GgmlType::Q4_1: launch_embedding_kernel<BlockDecoder<math::BlockQ4_1>>(p, 256, s); break;
    default:
      if (is_kquant_type(p.type)) return launch_kquant_embedding(p, s);  // kquant.cu
      return Status::Unsupported("cuda embedding: unsupported table type");
  }
  LS_CUDA_CHECK_LAUNCH("embedding");
  return Status::OK();
}

Status launch_rmsnorm(const RmsNormParams& p, cudaStream_t s) {
  rmsnorm_kernel<<<static_cast<unsigned>(p.n_rows), 256, 0, s>>>(p.x, p.weight, p.out, p.n_cols, p.eps);
  LS_CUDA_CHECK_LAUNCH("rmsnorm");
  return Status::OK();
}

Status launch_rope(const RopeParams& p, cudaStream_t s) {
  const int64_t n_rot = p.n_rot == 0 ? p.head_dim : p.n_rot;
  const int64_t n = p.n_tokens * p.n_heads * (n_rot / 2);
  if (n == 0) return Status::OK();
  float low = 0, high = 0;
  if (p.ext_factor != 0) math::rope_yarn_corr_dims(n_rot, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, low, high);
  const float mscale = math::rope_yarn_mscale(p.freq_scale, p.ext_factor, p.attn_factor);
  rope_kernel<<<grid_for(n, 256), 256, 0, s>>>(p, n_rot, low, high, mscale);
  LS_CUDA_CHECK_LAUNCH("rope");
  return Status::OK();
}

Status launch_silu_mul(const SiluMulParams& p, cudaStream_t s) {
  return launch_binary<SiluMulOp>("silu_mul", p.gate, p.up, p.out, p.n, s);
}

Status launch_gelu_mul(const GeluMulParams& p, cudaStream_t s) {
  return launch_binary<GeluMulOp>("gelu_mul", p.gate, p.up, p.out, p.n, s);
}

Status launch_add(const AddParams& p, cudaStream_t s) { return launch_binary<AddOp>("add", p.a, p.b, p.out, p.n, s); }

Status launch_scale(const ScaleParams& p, cudaStream_t s) {
  scale_kernel<<<grid_for(p.n, 256), 256, 0, s>>>(p.x, p.out, p.n, p.factor);
  LS_CUDA_CHECK_LAUNCH("scale");
  return Status::OK();
}

}  // namespace layerstream::kernels::cuda

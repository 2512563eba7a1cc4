// CUDA argmax for greedy sampling: one block of 1024 threads. The rule (the
// largest logit, the lowest index on ties, NaN never chosen, token 0 when all
// are NaN) is math::argmax_better, shared with the CPU sampler.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launchers.h"
#include "kernels/math/argmax.h"

namespace layerstream::kernels::cuda {
namespace {

constexpr int kThreads = 1024;

// Each thread keeps the best of its strided elements; a tree reduction then
// merges pairs. `n` marks "no candidate" (a thread that saw only NaN).
__global__ void argmax_kernel(const float* x, int64_t n, int32_t* out) {
  float bv = 0.0f;
  int64_t bi = n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    if (math::argmax_better(v, i, bv, bi, n)) {
      bv = v;
      bi = i;
    }
  }
  __shared__ float sv[kThreads];
  __shared__ int64_t si[kThreads];
  sv[threadIdx.x] = bv;
  si[threadIdx.x] = bi;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const float ov = sv[threadIdx.x + stride];
      const int64_t oi = si[threadIdx.x + stride];
      if (math::argmax_better(ov, oi, sv[threadIdx.x], si[threadIdx.x], n)) {
        sv[threadIdx.x] = ov;
        si[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = si[0] == n ? 0 : static_cast<int32_t>(si[0]);
}

}  // namespace

Status launch_argmax(const float* logits, int64_t n, int32_t* out_device, cudaStream_t s) {
  argmax_kernel<<<1, kThreads, 0, s>>>(logits, n, out_device);
  LS_CUDA_CHECK_LAUNCH("argmax");
  return Status::OK();
}

}  // namespace layerstream::kernels::cuda

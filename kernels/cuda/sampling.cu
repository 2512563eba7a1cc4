// CUDA argmax for greedy sampling: one block of 1024 threads, lowest index on ties.
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launchers.h"

namespace layerstream::kernels::cuda {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ bool better(float v, int64_t i, float bv, int64_t bi) {
  return v > bv || (v == bv && i < bi);
}

__global__ void argmax_kernel(const float* x, int64_t n, int32_t* out) {
  float bv = -FLT_MAX;
  int64_t bi = n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    if (bi == n || better(x[i], i, bv, bi)) {
      bv = x[i];
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
      if (oi != n && (si[threadIdx.x] == n || better(ov, oi, sv[threadIdx.x], si[threadIdx.x]))) {
        sv[threadIdx.x] = ov;
        si[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = static_cast<int32_t>(si[0]);
}

}  // namespace

Status launch_argmax(const float* logits, int64_t n, int32_t* out_device, cudaStream_t s) {
  argmax_kernel<<<1, kThreads, 0, s>>>(logits, n, out_device);
  LS_CUDA_CHECK_LAUNCH("argmax");
  return Status::OK();
}

}  // namespace layerstream::kernels::cuda

// A kernel that keeps a stream busy for a given time, for tests that need
// work still in flight (an event not yet complete).
#include <cuda_runtime.h>

#include "tests/kernels/cuda_spin_kernel.h"

namespace layerstream::testing {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) __nanosleep(1000);
}

}  // namespace

cudaError_t launch_spin(cudaStream_t stream, double seconds) {
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(seconds * 1e9));
  return cudaGetLastError();
}

}  // namespace layerstream::testing

// A kernel that writes through a null pointer: the test's way to provoke a
// sticky CUDA error (cudaErrorIllegalAddress) on purpose.
#include <cuda_runtime_api.h>

namespace {
__global__ void write_through_null(int* p) { *p = 42; }
}  // namespace

// Enqueues the faulting kernel on `stream`; returns the launch status.
cudaError_t launch_write_through_null(cudaStream_t stream) {
  write_through_null<<<1, 1, 0, stream>>>(nullptr);
  return cudaGetLastError();
}

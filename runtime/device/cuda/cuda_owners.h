// Owners of raw CUDA runtime resources: device buffers, pinned host buffers,
// streams and events, each a std::unique_ptr with a deleter, so no code frees
// one by hand and an early return cannot leak one. The allocating helpers
// report failure as a Status through the one CUDA check (cuda_check.h).
// Deleters ignore errors: they run in destructors, where a failure (a lost
// context) was already reported by the call that saw it first.
// Thread safety: as the CUDA runtime (any thread); one owner per resource.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <type_traits>

#include "layerstream/status.h"
#include "runtime/device/cuda/cuda_check.h"

namespace layerstream::cuda {

struct DeviceFree {
  void operator()(void* p) const noexcept { cudaFree(p); }
};
struct PinnedFree {
  void operator()(void* p) const noexcept { cudaFreeHost(p); }
};
struct StreamDestroy {
  void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
};
struct EventDestroy {
  void operator()(cudaEvent_t e) const noexcept { cudaEventDestroy(e); }
};

// Device memory from cudaMalloc.
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;
// Page-locked host memory from cudaHostAlloc.
using PinnedBuffer = std::unique_ptr<void, PinnedFree>;
using UniqueStream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroy>;
using UniqueEvent = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDestroy>;

// `bytes` of device memory; DeviceError naming `what` on failure.
inline Result<DeviceBuffer> device_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) return cuda_error(err, what, __FILE__, __LINE__);
  return DeviceBuffer(p);
}

// `bytes` of pinned host memory; DeviceError naming `what` on failure.
inline Result<PinnedBuffer> pinned_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (err != cudaSuccess) return cuda_error(err, what, __FILE__, __LINE__);
  return PinnedBuffer(p);
}

// A stream created with `flags` (cudaStreamNonBlocking for work that must not
// serialise with the legacy default stream).
inline Result<UniqueStream> create_stream(unsigned flags, const char* what) {
  cudaStream_t s = nullptr;
  const cudaError_t err = cudaStreamCreateWithFlags(&s, flags);
  if (err != cudaSuccess) return cuda_error(err, what, __FILE__, __LINE__);
  return UniqueStream(s);
}

// An event created with `flags` (cudaEventDefault keeps timing).
inline Result<UniqueEvent> create_event(unsigned flags, const char* what) {
  cudaEvent_t e = nullptr;
  const cudaError_t err = cudaEventCreateWithFlags(&e, flags);
  if (err != cudaSuccess) return cuda_error(err, what, __FILE__, __LINE__);
  return UniqueEvent(e);
}

}  // namespace layerstream::cuda

// CudaStream: a non-blocking cudaStream_t, destroyed (after draining) with the
// object. Copies are cudaMemcpyAsync, waits cudaStreamWaitEvent, host
// functions cudaLaunchHostFunc.
//
// Sticky errors: a host_func that returns an error makes that the stream's
// error: later host functions on it are skipped, later enqueue calls and
// synchronize() return it. (Device work already enqueued still runs; the GPU
// cannot be told to skip it.) A lost CUDA context fails every call with the
// "context is lost" DeviceError (cuda_check.h).
// Thread safety: as Stream; host functions run on a CUDA runtime thread.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>

#include "runtime/device/device.h"
#include "runtime/device/memory_ranges.h"

namespace layerstream::cuda {

// Error state shared by a stream and its in-flight host functions.
struct StreamErrorState {
  std::mutex mu;
  Status error;
};

class CudaStream final : public Stream {
 public:
  // Takes ownership of `stream`.
  CudaStream(cudaStream_t stream, std::shared_ptr<const MemoryRanges> ranges);
  ~CudaStream() override;

  Status copy_h2d(void* dst_device, const void* src_host, size_t bytes) override;
  Status copy_d2h(void* dst_host, const void* src_device, size_t bytes) override;
  Status copy_d2d(void* dst_device, const void* src_device, size_t bytes) override;
  Status record(Event& event) override;
  Status wait(const Event& event) override;
  Status host_func(std::function<Status()> fn) override;
  Status synchronize() override;
  void* native_handle() override { return stream_; }
  void range_push(const char* name) override;
  void range_pop() override;

 private:
  // OK, or the lost-context error, or this stream's sticky error.
  Status usable() const;

  cudaStream_t stream_;
  std::shared_ptr<const MemoryRanges> ranges_;
  std::shared_ptr<StreamErrorState> state_;
};

}  // namespace layerstream::cuda

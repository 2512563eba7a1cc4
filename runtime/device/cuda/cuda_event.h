// CudaEvent: a cudaEvent_t with timing enabled, destroyed with the object.
// Thread safety: as Event (one host thread at a time; `recorded` is atomic
// so another stream may wait on it while the owner records).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>

#include "runtime/device/device.h"

namespace layerstream::cuda {

class CudaEvent final : public Event {
 public:
  // Takes ownership of `event`.
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  ~CudaEvent() override;

  Status synchronize() override;
  Result<bool> query() override;
  Result<double> elapsed_ms_since(const Event& start) const override;

  cudaEvent_t handle() const { return event_; }
  bool recorded() const { return recorded_.load(std::memory_order_acquire); }
  void mark_recorded() { recorded_.store(true, std::memory_order_release); }

 private:
  cudaEvent_t event_;
  std::atomic<bool> recorded_{false};
};

}  // namespace layerstream::cuda

// CudaEvent: a cudaEvent_t with timing enabled, destroyed with the object.
// Times come from the device's CudaTimeline (cuda_timeline.h), so they stay
// precise however far apart two events are.
// Thread safety: as Event (one host thread at a time; `recorded` is atomic
// so another stream may wait on it while the owner records).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "runtime/device/cuda/cuda_owners.h"
#include "runtime/device/cuda/cuda_timeline.h"
#include "runtime/device/device.h"

namespace layerstream::cuda {

class CudaEvent final : public Event {
 public:
  // `timeline` may be null: times are then plain cudaEventElapsedTime.
  CudaEvent(UniqueEvent event, std::shared_ptr<CudaTimeline> timeline)
      : event_(std::move(event)), timeline_(std::move(timeline)) {}

  Status synchronize() override;
  // cudaErrorNotReady is the "false" answer, not an error: it is cleared from
  // the runtime's last-error slot so a later launch check does not see it.
  Result<bool> query() override;
  Result<double> elapsed_ms_since(const Event& start) const override;

  cudaEvent_t handle() const { return event_.get(); }
  bool recorded() const { return recorded_.load(std::memory_order_acquire); }
  // Called by CudaStream::record right after cudaEventRecord.
  void mark_recorded();

 private:
  std::shared_ptr<CudaTimeline::Anchor> anchor() const;

  UniqueEvent event_;
  std::shared_ptr<CudaTimeline> timeline_;
  mutable std::mutex mu_;
  std::shared_ptr<CudaTimeline::Anchor> anchor_;  // guarded by mu_; set at each record
  std::atomic<bool> recorded_{false};
};

}  // namespace layerstream::cuda

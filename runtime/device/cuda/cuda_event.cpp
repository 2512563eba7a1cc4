#include "runtime/device/cuda/cuda_event.h"

#include <string>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_check.h"

namespace layerstream::cuda {

void CudaEvent::mark_recorded() {
  auto a = timeline_ ? timeline_->anchor_for_record() : nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    anchor_ = std::move(a);
  }
  recorded_.store(true, std::memory_order_release);
}

std::shared_ptr<CudaTimeline::Anchor> CudaEvent::anchor() const {
  std::lock_guard<std::mutex> lock(mu_);
  return anchor_;
}

Status CudaEvent::synchronize() {
  LS_RETURN_IF_ERROR(context_status());
  if (!recorded()) return Status::OK();
  LS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_.get()));
  return Status::OK();
}

Result<bool> CudaEvent::query() {
  LS_RETURN_IF_ERROR(context_status());
  if (!recorded()) return true;
  const cudaError_t err = cudaEventQuery(event_.get());
  if (err == cudaErrorNotReady) {
    cudaGetLastError();  // "not yet" is an answer; leave no error behind for the next launch check
    return false;
  }
  if (err != cudaSuccess) return cuda_error(err, "cudaEventQuery(event_)", __FILE__, __LINE__);
  return true;
}

Result<double> CudaEvent::elapsed_ms_since(const Event& start) const {
  const auto* other = dynamic_cast<const CudaEvent*>(&start);
  if (other == nullptr) {
    return Status::InvalidArgument("elapsed_ms_since: the start event belongs to another backend");
  }
  if (!recorded() || !other->recorded()) {
    return Status::InvalidArgument(std::string("elapsed_ms_since: the ") + (!other->recorded() ? "start" : "end") +
                                   " event was never recorded");
  }
  LS_RETURN_IF_ERROR(context_status());
  if (timeline_ && timeline_ == other->timeline_) {
    return timeline_->elapsed_ms(other->handle(), other->anchor(), handle(), anchor());
  }
  float ms = 0;
  LS_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, other->handle(), handle()));
  return static_cast<double>(ms);
}

}  // namespace layerstream::cuda

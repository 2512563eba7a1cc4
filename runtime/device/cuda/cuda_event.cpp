#include "runtime/device/cuda/cuda_event.h"

#include "runtime/device/cuda/cuda_check.h"

namespace layerstream::cuda {

CudaEvent::~CudaEvent() { cudaEventDestroy(event_); }

Status CudaEvent::synchronize() {
  LS_RETURN_IF_ERROR(context_status());
  if (!recorded()) return Status::OK();
  LS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_));
  return Status::OK();
}

Result<bool> CudaEvent::query() {
  LS_RETURN_IF_ERROR(context_status());
  if (!recorded()) return true;
  cudaError_t err = cudaEventQuery(event_);
  if (err == cudaErrorNotReady) return false;
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
  float ms = 0;
  LS_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, other->event_, event_));
  return static_cast<double>(ms);
}

}  // namespace layerstream::cuda

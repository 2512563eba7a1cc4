#include "runtime/device/cuda/cuda_stream.h"

#include <exception>
#include <string>

#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_check.h"
#include "runtime/device/cuda/cuda_event.h"

#if LAYERSTREAM_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace layerstream::cuda {
namespace {

struct HostFuncCall {
  std::function<Status()> fn;
  std::shared_ptr<StreamErrorState> state;
};

// Runs on a CUDA runtime thread; must not call CUDA.
void CUDART_CB run_host_func(void* arg) {
  std::unique_ptr<HostFuncCall> call(static_cast<HostFuncCall*>(arg));
  {
    std::lock_guard<std::mutex> lock(call->state->mu);
    if (!call->state->error.ok()) return;  // skipped after a sticky error
  }
  Status s;
  try {
    s = call->fn();
  } catch (const std::exception& e) {
    s = Status::Internal(std::string("exception in host_func: ") + e.what());
  } catch (...) {
    s = Status::Internal("unknown exception in host_func");
  }
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(call->state->mu);
    if (call->state->error.ok()) call->state->error = s.WithContext("host_func");
  }
}

}  // namespace

CudaStream::CudaStream(cudaStream_t stream, std::shared_ptr<const MemoryRanges> ranges)
    : stream_(stream), ranges_(std::move(ranges)), state_(std::make_shared<StreamErrorState>()) {}

CudaStream::~CudaStream() {
  if (context_status().ok()) {
    cudaError_t err = cudaStreamSynchronize(stream_);
    if (err != cudaSuccess) {
      LS_LOG_WARN("{}", cuda_error(err, "cudaStreamSynchronize(stream_)", __FILE__, __LINE__).message());
    }
  }
  cudaStreamDestroy(stream_);
}

Status CudaStream::usable() const {
  LS_RETURN_IF_ERROR(context_status());
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->error.ok()) return state_->error.WithContext("stream failed earlier");
  return Status::OK();
}

Status CudaStream::copy_h2d(void* dst_device, const void* src_host, size_t bytes) {
  if (bytes == 0) return Status::OK();
  if (src_host == nullptr) return Status::InvalidArgument("copy_h2d source is a null pointer");
  LS_RETURN_IF_ERROR(ranges_->check(dst_device, bytes, "copy_h2d destination"));
  LS_RETURN_IF_ERROR(usable());
  LS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst_device, src_host, bytes, cudaMemcpyHostToDevice, stream_));
  return Status::OK();
}

Status CudaStream::copy_d2h(void* dst_host, const void* src_device, size_t bytes) {
  if (bytes == 0) return Status::OK();
  if (dst_host == nullptr) return Status::InvalidArgument("copy_d2h destination is a null pointer");
  LS_RETURN_IF_ERROR(ranges_->check(src_device, bytes, "copy_d2h source"));
  LS_RETURN_IF_ERROR(usable());
  LS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst_host, src_device, bytes, cudaMemcpyDeviceToHost, stream_));
  return Status::OK();
}

Status CudaStream::copy_d2d(void* dst_device, const void* src_device, size_t bytes) {
  if (bytes == 0) return Status::OK();
  LS_RETURN_IF_ERROR(ranges_->check(dst_device, bytes, "copy_d2d destination"));
  LS_RETURN_IF_ERROR(ranges_->check(src_device, bytes, "copy_d2d source"));
  LS_RETURN_IF_ERROR(check_no_overlap(dst_device, src_device, bytes, "copy_d2d"));
  LS_RETURN_IF_ERROR(usable());
  LS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst_device, src_device, bytes, cudaMemcpyDeviceToDevice, stream_));
  return Status::OK();
}

Status CudaStream::record(Event& event) {
  auto* ev = dynamic_cast<CudaEvent*>(&event);
  if (ev == nullptr) return Status::InvalidArgument("record: the event belongs to another backend");
  LS_RETURN_IF_ERROR(usable());
  LS_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev->handle(), stream_));
  ev->mark_recorded();
  return Status::OK();
}

Status CudaStream::wait(const Event& event) {
  const auto* ev = dynamic_cast<const CudaEvent*>(&event);
  if (ev == nullptr) return Status::InvalidArgument("wait: the event belongs to another backend");
  LS_RETURN_IF_ERROR(usable());
  if (!ev->recorded()) return Status::OK();
  LS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, ev->handle(), 0));
  return Status::OK();
}

Status CudaStream::host_func(std::function<Status()> fn) {
  if (!fn) return Status::InvalidArgument("host_func: empty function");
  LS_RETURN_IF_ERROR(usable());
  auto call = std::make_unique<HostFuncCall>(HostFuncCall{std::move(fn), state_});
  LS_CUDA_RETURN_IF_ERROR(cudaLaunchHostFunc(stream_, run_host_func, call.get()));
  call.release();  // owned by run_host_func now
  return Status::OK();
}

Status CudaStream::synchronize() {
  LS_RETURN_IF_ERROR(context_status());
  LS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

void CudaStream::range_push(const char* name) {
#if LAYERSTREAM_HAVE_NVTX
  nvtxRangePushA(name);
#endif
}

void CudaStream::range_pop() {
#if LAYERSTREAM_HAVE_NVTX
  nvtxRangePop();
#endif
}

}  // namespace layerstream::cuda

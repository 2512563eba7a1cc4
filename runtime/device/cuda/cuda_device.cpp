#include "runtime/device/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <string>

#include "fmt/format.h"
#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_check.h"
#include "runtime/device/cuda/cuda_event.h"
#include "runtime/device/cuda/cuda_stream.h"
#include "runtime/device/cuda/cuda_timeline.h"
#include "runtime/device/memory_ranges.h"

namespace layerstream::cuda {
namespace {

std::string bytes_text(uint64_t b) { return fmt::format("{} ({} B)", format_bytes(b), b); }

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, DeviceInfo info, std::shared_ptr<CudaTimeline> timeline)
      : ordinal_(ordinal),
        info_(std::move(info)),
        ranges_(std::make_shared<MemoryRanges>()),
        timeline_(std::move(timeline)) {}

  const DeviceInfo& info() const override { return info_; }

  Result<std::unique_ptr<Arena>> create_arena(uint64_t budget_bytes) override {
    if (budget_bytes == 0) return Status::InvalidArgument("cuda arena: budget is 0 bytes");
    LS_RETURN_IF_ERROR(current());
    size_t free_b = 0, total_b = 0;
    LS_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_b, &total_b));
    if (budget_bytes > free_b) {
      return Status::OutOfBudget(fmt::format("cuda arena: budget {} exceeds free device memory {} of {} on {}",
                                             bytes_text(budget_bytes), bytes_text(free_b), bytes_text(total_b),
                                             info_.name));
    }
    void* base = nullptr;
    cudaError_t err = cudaMalloc(&base, budget_bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return Status::OutOfBudget(fmt::format("cuda arena: cudaMalloc of {} failed with {} free on {}",
                                             bytes_text(budget_bytes), bytes_text(free_b), info_.name));
    }
    if (err != cudaSuccess) return cuda_error(err, "cudaMalloc(&base, budget_bytes)", __FILE__, __LINE__);
    ranges_->add(base, budget_bytes);
    auto release = [ranges = ranges_](void* p) {
      ranges->remove(p);
      cudaFree(p);
    };
    return std::make_unique<Arena>(base, budget_bytes, std::move(release));
  }

  Result<HostBuffer> alloc_pinned(size_t bytes) override {
    if (bytes == 0) return Status::InvalidArgument("alloc_pinned: 0 bytes");
    LS_RETURN_IF_ERROR(current());
    void* p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return Status::OutOfBudget(fmt::format("alloc_pinned: cudaHostAlloc of {} failed (page-locked memory exhausted)",
                                             bytes_text(bytes)));
    }
    if (err != cudaSuccess) return cuda_error(err, "cudaHostAlloc(&p, bytes, cudaHostAllocDefault)", __FILE__, __LINE__);
    return HostBuffer(p, bytes, [](void* q) { cudaFreeHost(q); });
  }

  Result<HostBuffer> register_host(void* data, size_t bytes) override {
    if (data == nullptr || bytes == 0) {
      return Status::InvalidArgument(fmt::format("register_host: empty buffer ({}, {} B)", data, bytes));
    }
    LS_RETURN_IF_ERROR(current());
    LS_CUDA_RETURN_IF_ERROR(cudaHostRegister(data, bytes, cudaHostRegisterDefault));
    return HostBuffer(data, bytes, [](void* q) { cudaHostUnregister(q); });
  }

  Result<std::unique_ptr<Stream>> create_stream(StreamRole role) override {
    LS_RETURN_IF_ERROR(current());
    cudaStream_t s = nullptr;
    LS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return std::unique_ptr<Stream>(std::make_unique<CudaStream>(s, ranges_));
  }

  Result<std::unique_ptr<Event>> create_event() override {
    LS_RETURN_IF_ERROR(current());
    LS_ASSIGN_OR_RETURN(UniqueEvent e, ::layerstream::cuda::create_event(cudaEventDefault, "cudaEventCreateWithFlags(cudaEventDefault)"));
    return std::unique_ptr<Event>(std::make_unique<CudaEvent>(std::move(e), timeline_));
  }

 private:
  // Makes this device current on the calling thread (the runtime's current
  // device is per thread; the scheduler calls from several).
  Status current() const {
    LS_RETURN_IF_ERROR(context_status());
    LS_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
    return Status::OK();
  }

  const int ordinal_;
  DeviceInfo info_;
  std::shared_ptr<MemoryRanges> ranges_;
  std::shared_ptr<CudaTimeline> timeline_;  // shared by this device's events
};

}  // namespace

Result<std::unique_ptr<Device>> open_cuda_device(const DeviceOptions& options) {
  int count = 0;
  LS_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (options.cuda_device < 0 || options.cuda_device >= count) {
    return Status::InvalidArgument(
        fmt::format("CUDA device index {} out of range: {} device(s) present", options.cuda_device, count));
  }
  LS_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.cuda_device));
  cudaDeviceProp prop{};
  LS_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.cuda_device));
  size_t free_b = 0, total_b = 0;
  LS_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_b, &total_b));
  DeviceInfo info;
  info.backend = BackendKind::kCuda;
  info.name = prop.name;
  info.total_memory_bytes = total_b;
  info.free_memory_bytes = free_b;
  info.copy_engines = prop.asyncEngineCount > 0 ? prop.asyncEngineCount : 1;
  info.host_addressable = false;
  info.sim_link_gbps = 0;
  if (options.sim_link_gbps > 0) {
    LS_LOG_WARN("device: sim-link {} GB/s is ignored on the cuda backend (the real link is used)",
                options.sim_link_gbps);
  }
  LS_LOG_INFO("device: opened cuda:{} {} (sm_{}{}), {} total, {} free, {} copy engine(s)", options.cuda_device,
              info.name, prop.major, prop.minor, format_bytes(total_b), format_bytes(free_b), info.copy_engines);
  LS_ASSIGN_OR_RETURN(auto timeline, CudaTimeline::create());
  return std::unique_ptr<Device>(std::make_unique<CudaDevice>(options.cuda_device, std::move(info), std::move(timeline)));
}

}  // namespace layerstream::cuda

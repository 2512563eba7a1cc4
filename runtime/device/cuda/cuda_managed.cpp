#include "runtime/device/cuda/cuda_managed.h"

#include <algorithm>

#include "layerstream/units.h"
#include "runtime/core/status_macros.h"

namespace layerstream::cuda {

namespace {

cudaMemLocation device_location(int device) {
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id = device;
  return loc;
}

cudaMemLocation host_location() {
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeHost;
  loc.id = 0;  // ignored for the host
  return loc;
}

}  // namespace

Result<std::unique_ptr<ManagedModelFile>> ManagedModelFile::load(const std::string& name, uint64_t bytes,
                                                                 const ReadFn& read, int device,
                                                                 uint64_t other_device_bytes, int tickets) {
  if (tickets < 1) return Status::InvalidArgument("managed model file: tickets must be >= 1");
  if (bytes == 0) return Status::InvalidArgument(name + " is empty");

  LS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  int concurrent = 0;  // prefetch and read-mostly duplicates need it
  LS_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
  if (!concurrent)
    return Status::Unsupported("uvm: CUDA device " + std::to_string(device) +
                               " has no concurrent managed access (cudaDevAttrConcurrentManagedAccess = 0), so "
                               "managed memory cannot be prefetched or read-duplicated on it");
  size_t free_b = 0, total_b = 0;
  LS_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_b, &total_b));
  const uint64_t usable = static_cast<uint64_t>(free_b) / 10 * 9;
  if (bytes + other_device_bytes > usable) {
    const uint64_t room = usable > other_device_bytes ? usable - other_device_bytes : 0;
    return Status::OutOfBudget(
        "uvm: the model file (" + format_bytes(bytes) + ") in managed memory plus the runner's own device memory (" +
        format_bytes(other_device_bytes) + ") exceed 90% of the device's free memory (" + format_bytes(free_b) +
        "); asking for more managed memory than the card has free can hang the GPU. At most " + format_bytes(room) +
        " of model fits next to this budget: use a smaller model or a smaller --vram");
  }

  std::unique_ptr<ManagedModelFile> m(new ManagedModelFile());
  m->device_ = device;
  m->size_ = bytes;
  {
    void* p = nullptr;
    LS_CUDA_RETURN_IF_ERROR(cudaMallocManaged(&p, bytes, cudaMemAttachGlobal));
    m->mem_.reset(p);
  }
  // Written by the CPU first, so every page starts on the host.
  LS_RETURN_IF_ERROR(read(0, bytes, m->mem_.get()).WithContext("uvm: reading " + name + " into managed memory"));
  LS_CUDA_RETURN_IF_ERROR(cudaMemAdvise(m->mem_.get(), bytes, cudaMemAdviseSetPreferredLocation, host_location()));
  LS_CUDA_RETURN_IF_ERROR(cudaMemAdvise(m->mem_.get(), bytes, cudaMemAdviseSetReadMostly, device_location(device)));
  LS_ASSIGN_OR_RETURN(m->prefetch_stream_, create_stream(cudaStreamNonBlocking, "uvm prefetch stream"));
  m->events_.reserve(static_cast<size_t>(tickets));
  for (int i = 0; i < tickets; ++i) {
    LS_ASSIGN_OR_RETURN(UniqueEvent e, create_event(cudaEventDisableTiming, "uvm prefetch event"));
    m->events_.push_back(std::move(e));
  }
  return m;
}

Status ManagedModelFile::prefetch(uint64_t offset, uint64_t bytes, int ticket) {
  if (ticket < 0 || ticket >= static_cast<int>(events_.size()))
    return Status::InvalidArgument("uvm prefetch: ticket " + std::to_string(ticket) + " out of range");
  if (offset > size_ || bytes > size_ - offset)
    return Status::InvalidArgument("uvm prefetch: span [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                                   ") is outside the " + std::to_string(size_) + "-byte file");
  LS_CUDA_RETURN_IF_ERROR(cudaMemPrefetchAsync(static_cast<uint8_t*>(mem_.get()) + offset, bytes,
                                               device_location(device_), 0, prefetch_stream_.get()));
  LS_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[ticket].get(), prefetch_stream_.get()));
  return Status::OK();
}

Status ManagedModelFile::wait(int ticket, void* stream) {
  if (ticket < 0 || ticket >= static_cast<int>(events_.size()))
    return Status::InvalidArgument("uvm wait: ticket " + std::to_string(ticket) + " out of range");
  LS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), events_[ticket].get(), 0));
  return Status::OK();
}

}  // namespace layerstream::cuda

// ManagedModelFile: a whole model file in one CUDA managed allocation
// (cudaMallocManaged), for the `uvm` bench strategy: the driver pages the
// weights onto the device on demand, the usual "just use unified memory"
// alternative to planned streaming. The bytes are read from the file once,
// then advised read-mostly (device copies are duplicates the driver may drop
// without writing back) with the CPU as preferred location (the home of every
// page; the device holds what was prefetched or faulted in, evicted under
// pressure). prefetch() moves a span to the device on this object's own
// stream; wait() makes another stream wait for that prefetch.
//
// Size cap: managed memory that the card cannot hold can hang the GPU, so
// load() refuses (OutOfBudget, saying what would fit) unless the file plus
// `other_device_bytes` (the caller's own device allocations) fit in 90% of
// the free device memory.
// Thread safety: one thread uses an object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/device/cuda/cuda_owners.h"

namespace layerstream::cuda {

struct ManagedFree {
  void operator()(void* p) const noexcept { cudaFree(p); }
};

class ManagedModelFile {
 public:
  // read(offset, bytes, dst) fills dst with `bytes` bytes of the file from
  // `offset` (the caller's io::Reader: its options and fault injection apply).
  using ReadFn = std::function<Status(uint64_t offset, uint64_t bytes, void* dst)>;
  // Reads the file `name` of `bytes` bytes through `read` into managed
  // memory on CUDA device `device` (the current device is set to it).
  // `tickets`: prefetch events kept (one per layer).
  static Result<std::unique_ptr<ManagedModelFile>> load(const std::string& name, uint64_t bytes, const ReadFn& read,
                                                        int device, uint64_t other_device_bytes, int tickets);

  const uint8_t* data() const { return static_cast<const uint8_t*>(mem_.get()); }
  uint64_t size() const { return size_; }
  // Enqueues cudaMemPrefetchAsync of [offset, offset + bytes) to the device
  // on the prefetch stream and records ticket's event behind it.
  Status prefetch(uint64_t offset, uint64_t bytes, int ticket);
  // `stream` (a cudaStream_t) waits for the last prefetch recorded under ticket.
  Status wait(int ticket, void* stream);

 private:
  ManagedModelFile() = default;
  std::unique_ptr<void, ManagedFree> mem_;
  uint64_t size_ = 0;
  int device_ = 0;
  UniqueStream prefetch_stream_;
  std::vector<UniqueEvent> events_;
};

}  // namespace layerstream::cuda

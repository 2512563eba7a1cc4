// StagingRing: a few page-aligned host buffers (mmap) that disk reads fill and
// H2D copies drain, so the two pipeline chunk by chunk. The buffers are
// pinned once at start-up through `pin` (the device's register_host) and can
// be registered with a Reader as io_uring fixed buffers; never per transfer.
//
// Ownership: the ring owns the mappings and the pin handles; destruction
// unpins, then unmaps. Every acquired buffer must be released first (REQUIRES).
// Thread safety: acquire/try_acquire/release/close are thread-safe (the disk
// thread acquires, the copy stream's completion callback releases).
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "layerstream/status.h"
#include "runtime/device/device.h"

namespace layerstream::io {

// Pins [data, data + bytes) for fast DMA, e.g. Device::register_host.
using PinFn = std::function<Result<HostBuffer>(void*, size_t)>;

struct StagingRingOptions {
  size_t buffer_bytes = size_t{16} << 20;  // each buffer, rounded up to the page size; 4 KiB..1 GiB
  unsigned buffer_count = 4;               // 1..64
  PinFn pin;                               // empty: plain page-aligned RAM (host backend)
};

struct StagingBuffer {
  unsigned index = 0;
  void* data = nullptr;  // page-aligned
  size_t bytes = 0;
};

class StagingRing {
 public:
  // mmaps and pins every buffer. OutOfBudget when mmap fails (names the
  // bytes); the pin callback's error is passed on with context.
  static Result<std::unique_ptr<StagingRing>> create(const StagingRingOptions& options);
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  unsigned buffer_count() const { return static_cast<unsigned>(buffers_.size()); }
  size_t buffer_bytes() const { return buffer_bytes_; }
  // One iovec per buffer, in index order: pass to Reader::register_buffers.
  const std::vector<iovec>& iovecs() const { return buffers_; }
  bool pinned() const { return !pins_.empty(); }
  // Seconds spent in the pin callback at start-up (0 when not pinned).
  double pin_seconds() const { return pin_seconds_; }

  // Blocks until a buffer is free or `timeout` passes (negative: no limit);
  // std::nullopt on timeout, Cancelled after close().
  Result<std::optional<StagingBuffer>> acquire(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
  std::optional<StagingBuffer> try_acquire();
  // Returns a buffer acquired earlier. Aborts on a buffer not acquired (bug).
  void release(unsigned index);
  // Wakes every waiting acquire() with Cancelled; later acquires fail too.
  void close();
  unsigned free_count() const;

 private:
  StagingRing() = default;

  size_t buffer_bytes_ = 0;
  size_t map_bytes_ = 0;
  std::vector<iovec> buffers_;
  std::vector<HostBuffer> pins_;
  double pin_seconds_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<unsigned> free_;
  std::vector<bool> in_use_;
  bool closed_ = false;
};

}  // namespace layerstream::io

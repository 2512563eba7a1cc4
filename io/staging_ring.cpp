#include "io/staging_ring.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <fmt/format.h>

#include "layerstream/units.h"
#include "runtime/core/status_macros.h"

namespace layerstream::io {

Result<std::unique_ptr<StagingRing>> StagingRing::create(const StagingRingOptions& o) {
  if (o.buffer_count < 1 || o.buffer_count > 64) {
    return Status::InvalidArgument(fmt::format("staging ring buffer count {} is out of range 1..64", o.buffer_count));
  }
  if (o.buffer_bytes < 4096 || o.buffer_bytes > (size_t{1} << 30)) {
    return Status::InvalidArgument(fmt::format("staging buffer size {} bytes is out of range 4 KiB..1 GiB", o.buffer_bytes));
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::unique_ptr<StagingRing> ring(new StagingRing());
  ring->buffer_bytes_ = (o.buffer_bytes + page - 1) / page * page;
  ring->map_bytes_ = ring->buffer_bytes_;
  for (unsigned i = 0; i < o.buffer_count; ++i) {
    void* p = ::mmap(nullptr, ring->map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      return Status::OutOfBudget(fmt::format("staging ring: mmap of buffer {} ({}) failed: {}", i,
                                             format_bytes(ring->map_bytes_), Status::FromErrno("mmap", errno).message()));
    }
    ring->buffers_.push_back({p, ring->buffer_bytes_});
  }
  if (o.pin) {
    auto t0 = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < o.buffer_count; ++i) {
      auto pinned = o.pin(ring->buffers_[i].iov_base, ring->buffer_bytes_);
      if (!pinned.ok()) {
        return pinned.status().WithContext(
            fmt::format("staging ring: pinning buffer {} of {}", i, format_bytes(ring->buffer_bytes_)));
      }
      ring->pins_.push_back(std::move(pinned).value());
    }
    ring->pin_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  ring->in_use_.assign(o.buffer_count, false);
  for (unsigned i = o.buffer_count; i-- > 0;) ring->free_.push_back(i);
  return ring;
}

StagingRing::~StagingRing() {
  pins_.clear();  // unpin before unmapping
  for (const iovec& b : buffers_) ::munmap(b.iov_base, map_bytes_);
}

Result<std::optional<StagingBuffer>> StagingRing::acquire(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [this] { return closed_ || !free_.empty(); };
  if (timeout.count() < 0) {
    cv_.wait(lock, ready);
  } else if (!cv_.wait_for(lock, timeout, ready)) {
    return std::optional<StagingBuffer>();
  }
  if (closed_) return Status::Cancelled("staging ring closed");
  unsigned i = free_.back();
  free_.pop_back();
  in_use_[i] = true;
  return std::optional<StagingBuffer>(StagingBuffer{i, buffers_[i].iov_base, buffer_bytes_});
}

std::optional<StagingBuffer> StagingRing::try_acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || free_.empty()) return std::nullopt;
  unsigned i = free_.back();
  free_.pop_back();
  in_use_[i] = true;
  return StagingBuffer{i, buffers_[i].iov_base, buffer_bytes_};
}

void StagingRing::release(unsigned index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    LS_CHECK_MSG(index < in_use_.size() && in_use_[index], "release of a staging buffer that is not acquired");
    in_use_[index] = false;
    free_.push_back(index);
  }
  cv_.notify_one();
}

void StagingRing::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

unsigned StagingRing::free_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<unsigned>(free_.size());
}

}  // namespace layerstream::io

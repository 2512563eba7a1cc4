// IoHooks: the injectable syscall layer. A reader calls these around the
// operating-system calls it makes so tests (io/fault_injection.h) can make
// io_uring unavailable, make O_DIRECT refused, or rewrite read results into
// short reads, EINTR, EAGAIN or EIO at chosen offsets.
//
// Thread safety: after_read may be called from reader worker threads
// concurrently; implementations must be thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace layerstream::io {

class IoHooks {
 public:
  virtual ~IoHooks() = default;
  // Before io_uring setup. A nonzero errno makes setup fail with it (ENOSYS, EPERM).
  virtual int before_uring_setup() { return 0; }
  // Before open(); `direct` says whether O_DIRECT is asked. Nonzero errno fails the open.
  virtual int before_open(const std::string& path, bool direct) { return 0; }
  // After each read of `requested` bytes at file `offset` finished with
  // `result` (bytes read, or -errno). May rewrite result: a smaller count
  // (short read; the buffer past it is then considered unread) or -errno.
  virtual void after_read(uint64_t offset, size_t requested, int64_t& result) {}
};

}  // namespace layerstream::io

// ReadBackend: how a ChunkedReader gets one chunk read — io_uring or a pread
// thread pool. Internal to io/.
//
// The backend only moves bytes; all bookkeeping (splitting, retries, short
// reads, errors) is the ChunkedReader's. A chunk is identified by its slot
// number (0..queue_depth-1), at most one read per slot in flight.
// Thread safety: called from the reader's one user thread only.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "layerstream/status.h"

namespace layerstream::io {

struct RawResult {
  unsigned slot = 0;
  int64_t result = 0;  // bytes read, or -errno (-ECANCELED when cancelled)
};

class ReadBackend {
 public:
  virtual ~ReadBackend() = default;
  // Starts reading `len` bytes at file `offset` into `dst` for `slot`.
  virtual Status issue(unsigned slot, uint64_t offset, size_t len, void* dst) = 0;
  // Makes issued reads visible to the kernel/workers (io_uring_submit).
  virtual Status flush() { return Status::OK(); }
  // Appends finished reads to `out`, blocking until at least one is there or
  // `timeout` passes (negative: no limit). May return with none (timeout, EINTR).
  virtual Status reap(std::vector<RawResult>& out, std::chrono::milliseconds timeout) = 0;
  // Asks for every in-flight read to stop early; each still reports one result
  // through reap (possibly -ECANCELED, possibly complete).
  virtual void cancel_all() = 0;
  virtual Status register_buffers(std::span<const iovec> buffers) { return Status::OK(); }
  // "io_uring" or "pread pool, 16 threads".
  virtual std::string name() const = 0;
};

}  // namespace layerstream::io

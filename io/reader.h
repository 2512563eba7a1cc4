// The file reader: asynchronous reads of aligned byte spans of one file, many
// in flight, with completions carrying the caller's tag.
//
// Implementations (chosen by open_reader): io_uring with O_DIRECT (the fast
// path), a pread thread pool with O_DIRECT, and a buffered pread pool. Each
// request is split into chunks of at most chunk_bytes; at most queue_depth
// chunks are in flight. Short reads are resubmitted for the rest; EINTR and
// EAGAIN are retried; other errors complete the request with an IOError
// naming the file, the offset and the errno.
//
// Contract: every submitted request produces exactly one ReadCompletion,
// returned by wait() (after cancel(), with status Cancelled).
// Thread safety: a Reader is used by one thread at a time (the copy thread);
// its internal workers are its own business.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "layerstream/options.h"
#include "layerstream/status.h"

namespace layerstream::io {

class IoHooks;

// The public enum (layerstream/options.h): names and parsing are name_of and
// io_path_from_name there.
using IoPath = ::layerstream::IoPath;

struct ReaderOptions {
  IoPath path = IoPath::kAuto;
  // Chunks in flight at once (io_uring queue depth, or pread threads). 1..1024.
  unsigned queue_depth = 16;
  // A request is read in chunks of at most this many bytes (rounded up to the
  // alignment). 4 KiB..256 MiB.
  size_t chunk_bytes = size_t{1} << 20;
  // read_span's bounce buffer, bytes (rounded up to the alignment).
  size_t bounce_bytes = size_t{4} << 20;
  // Test/fault-injection hooks; not owned, must outlive the reader. nullptr = none.
  IoHooks* hooks = nullptr;
};

struct ReadRequest {
  uint64_t offset = 0;  // multiple of alignment()
  size_t bytes = 0;     // > 0, multiple of alignment(); may run past end of file
  void* dst = nullptr;  // aligned to memory_alignment(), `bytes` writable, untouched by the caller until completion
  uint64_t tag = 0;     // returned in the completion
};

struct ReadCompletion {
  uint64_t tag = 0;
  // On success min(bytes, file_size - offset): the read stops at end of file.
  size_t bytes_read = 0;
  // OK, IOError ("read <file> at offset <o> (<n> bytes): <strerror> (errno N)"),
  // or Cancelled after cancel().
  Status status;
};

inline constexpr std::chrono::milliseconds kWaitForever{-1};

class Reader {
 public:
  virtual ~Reader() = default;
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  virtual IoPath kind() const = 0;  // kUring, kPread or kBuffered (never kAuto)
  virtual const std::string& file_path() const = 0;
  virtual uint64_t file_size() const = 0;
  virtual bool direct() const = 0;  // the file is open with O_DIRECT
  // Offset and length alignment that submit() requires (1 when buffered).
  virtual size_t alignment() const = 0;
  // Buffer address alignment that submit() requires (1 when buffered).
  virtual size_t memory_alignment() const = 0;
  virtual unsigned queue_depth() const = 0;
  virtual size_t chunk_bytes() const = 0;
  // E.g. "io_uring, O_DIRECT, align 512, qd 16, chunk 1.00 MiB".
  virtual std::string description() const = 0;

  // Registers buffers the caller owns (the staging ring) with the kernel so
  // reads into them skip per-I/O page pinning (io_uring fixed buffers; no-op
  // elsewhere). Replaces any earlier registration. REQUIRES: nothing in flight.
  // The buffers must stay mapped until the reader is destroyed or re-registered.
  virtual Status register_buffers(std::span<const iovec> buffers) = 0;

  // Queues a read; never blocks on the disk. InvalidArgument for misaligned or
  // out-of-file requests (naming the value and the limit).
  virtual Status submit(const ReadRequest& request) = 0;

  // Returns up to out.size() completions, blocking until at least one is
  // available or `timeout` passes (kWaitForever: no limit). Returns 0 on
  // timeout or when nothing is outstanding. Errors here are reader failures
  // (the ring itself broke), not per-request errors.
  Result<size_t> wait(std::span<ReadCompletion> out, std::chrono::milliseconds timeout = kWaitForever);

  // Requests submitted and not yet returned by wait().
  size_t outstanding() const { return stash_.size() + outstanding_impl(); }

  // Stops all outstanding requests: blocks until the kernel/workers no longer
  // touch any request buffer, then every unfinished request completes with
  // Cancelled (returned by later wait() calls). Called by the destructor.
  virtual void cancel() = 0;

  // Synchronous convenience: reads exactly [offset, offset + bytes) into dst
  // (any alignment) by reading the aligned superset through a bounce buffer.
  // Other requests may be in flight; their completions are kept for wait().
  // InvalidArgument when the span runs past end of file.
  Status read_span(uint64_t offset, size_t bytes, void* dst);

 protected:
  Reader() = default;
  virtual Result<size_t> wait_impl(std::span<ReadCompletion> out, std::chrono::milliseconds timeout) = 0;
  virtual size_t outstanding_impl() const = 0;
  virtual size_t bounce_bytes() const = 0;
  // Moves up to out.size() completions from the front of `from` into out,
  // in order; returns how many.
  static size_t take_front(std::deque<ReadCompletion>& from, std::span<ReadCompletion> out);

 private:
  Status read_aligned(uint64_t offset, size_t bytes, void* dst, uint64_t tag);

  std::deque<ReadCompletion> stash_;  // completions read_span collected for others
  std::unique_ptr<uint8_t, void (*)(void*)> bounce_{nullptr, nullptr};
  size_t bounce_size_ = 0;
  uint64_t next_span_tag_ = 0;
};

// Opens `path` for reading with the path asked for. kAuto tries io_uring with
// O_DIRECT, then a pread pool with O_DIRECT, then buffered pread, and logs
// (once per distinct choice) which path is in use and why. A forced path that
// cannot work is an error saying why (e.g. io_uring refused by the kernel).
// kUring on a file system that refuses O_DIRECT uses io_uring buffered.
Result<std::unique_ptr<Reader>> open_reader(const std::string& path, const ReaderOptions& options = {});

}  // namespace layerstream::io

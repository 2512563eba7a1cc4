#include "io/reader.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "io/chunked_reader.h"
#include "io/file_handle.h"
#include "io/pread_backend.h"
#include "io/uring_backend.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"

namespace layerstream::io {

// ---- Reader: wait with the read_span stash, read_span -------------------------

namespace {
// Tags with the top byte 0xF5 are reserved for read_span.
constexpr uint64_t kSpanTagBase = uint64_t{0xF5} << 56;
}  // namespace

Result<size_t> Reader::wait(std::span<ReadCompletion> out, std::chrono::milliseconds timeout) {
  if (!stash_.empty()) return take_front(stash_, out);
  return wait_impl(out, timeout);
}

size_t Reader::take_front(std::deque<ReadCompletion>& from, std::span<ReadCompletion> out) {
  const size_t n = std::min(out.size(), from.size());
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::move(from.front());
    from.pop_front();
  }
  return n;
}

Status Reader::read_aligned(uint64_t offset, size_t bytes, void* dst, uint64_t tag) {
  LS_RETURN_IF_ERROR(submit({offset, bytes, dst, tag}));
  ReadCompletion c[8];
  std::optional<ReadCompletion> mine;
  while (!mine) {
    LS_ASSIGN_OR_RETURN(size_t n, wait_impl(c, kWaitForever));
    if (n == 0) return Status::Internal(fmt::format("read_span of {}: completion lost", file_path()));
    // Keep every other request's completion of this batch for wait(), even
    // those that come after ours.
    for (size_t i = 0; i < n; ++i) {
      if (c[i].tag == tag) mine = std::move(c[i]);
      else stash_.push_back(std::move(c[i]));
    }
  }
  LS_RETURN_IF_ERROR(mine->status);
  uint64_t want = std::min<uint64_t>(bytes, file_size() - offset);
  if (mine->bytes_read < want) {
    return Status::IOError(fmt::format("read {} at offset {}: got {} of {} bytes", file_path(), offset,
                                       mine->bytes_read, want));
  }
  return Status::OK();
}

Status Reader::read_span(uint64_t offset, size_t bytes, void* dst) {
  if (bytes == 0) return Status::OK();
  if (offset > file_size() || bytes > file_size() - offset) {
    return Status::InvalidArgument(fmt::format("read_span of {} bytes at offset {} runs past the end of {} ({} bytes)",
                                               bytes, offset, file_path(), file_size()));
  }
  const size_t a = alignment();
  const size_t ma = memory_alignment();
  if (offset % a == 0 && bytes % a == 0 && reinterpret_cast<uintptr_t>(dst) % ma == 0) {
    return read_aligned(offset, bytes, dst, kSpanTagBase | next_span_tag_++);
  }
  if (!bounce_) {
    bounce_size_ = std::max((bounce_bytes() + a - 1) / a * a, 2 * a);
    size_t mem_align = std::max<size_t>(ma, 4096);
    void* p = std::aligned_alloc(mem_align, (bounce_size_ + mem_align - 1) / mem_align * mem_align);
    if (!p) return Status::OutOfBudget(fmt::format("read_span bounce buffer of {} bytes", bounce_size_));
    bounce_ = {static_cast<uint8_t*>(p), &std::free};
  }
  const uint64_t end = offset + bytes;
  uint64_t pos = offset;
  auto* out = static_cast<uint8_t*>(dst);
  while (pos < end) {
    uint64_t a0 = pos / a * a;
    uint64_t a1 = std::min<uint64_t>(a0 + bounce_size_, (end + a - 1) / a * a);
    LS_RETURN_IF_ERROR(read_aligned(a0, static_cast<size_t>(a1 - a0), bounce_.get(), kSpanTagBase | next_span_tag_++));
    uint64_t piece_end = std::min(end, a1);
    std::memcpy(out + (pos - offset), bounce_.get() + (pos - a0), static_cast<size_t>(piece_end - pos));
    pos = piece_end;
  }
  return Status::OK();
}

// ---- open_reader ------------------------------------------------------------

namespace {

Status validate(const ReaderOptions& o) {
  if (o.queue_depth < 1 || o.queue_depth > 1024) {
    return Status::InvalidArgument(fmt::format("I/O queue depth {} is out of range 1..1024", o.queue_depth));
  }
  if (o.chunk_bytes < 4096 || o.chunk_bytes > (size_t{256} << 20)) {
    return Status::InvalidArgument(fmt::format("I/O chunk size {} bytes is out of range 4 KiB..256 MiB", o.chunk_bytes));
  }
  if (o.bounce_bytes < 4096 || o.bounce_bytes > (size_t{1} << 30)) {
    return Status::InvalidArgument(fmt::format("read_span bounce size {} bytes is out of range 4 KiB..1 GiB", o.bounce_bytes));
  }
  return Status::OK();
}

// Logs the chosen path once per distinct (description, reason).
void log_choice_once(const std::string& path, const std::string& desc, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::string key = desc + "|" + why;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(key).second) {
      LS_LOG_DEBUG("io: reading {} with {} ({})", path, desc, why);
      return;
    }
  }
  LS_LOG_INFO("io: reading {} with {} ({})", path, desc, why);
}

}  // namespace

Result<std::unique_ptr<Reader>> open_reader(const std::string& path, const ReaderOptions& options) {
  LS_RETURN_IF_ERROR(validate(options));
  ReaderOptions o = options;
  const bool want_direct = o.path != IoPath::kBuffered;
  std::string why_not_direct;
  LS_ASSIGN_OR_RETURN(OpenedFile file, open_file(path, want_direct, o.hooks, &why_not_direct));
  const size_t a = file.offset_align;
  o.chunk_bytes = (o.chunk_bytes + a - 1) / a * a;
  o.bounce_bytes = std::max((o.bounce_bytes + a - 1) / a * a, 2 * a);

  std::unique_ptr<ReadBackend> backend;
  IoPath kind = IoPath::kAuto;
  std::string why;
  auto with_direct_note = [&](std::string s) { return why_not_direct.empty() ? s : s + "; " + why_not_direct; };

  if (o.path == IoPath::kUring || (o.path == IoPath::kAuto && file.direct)) {
    int err = 0;
    auto r = make_uring_backend(file.fd.get(), o.queue_depth, o.hooks, &err);
    if (r.ok()) {
      backend = std::move(r).value();
      kind = IoPath::kUring;
      why = o.path == IoPath::kUring ? with_direct_note("forced by --io uring")
                                     : fmt::format("io_uring available, O_DIRECT alignment from {}", file.align_source);
    } else if (o.path == IoPath::kUring) {
      return r.status().WithContext(fmt::format("--io uring for {}: io_uring is unavailable", path));
    } else {
      why = fmt::format("io_uring unavailable: {}", r.status().message());
      if (err == EPERM) why += " (seccomp or kernel.io_uring_disabled?)";
    }
  }
  if (!backend) {
    backend = make_pread_backend(file.fd.get(), o.queue_depth);
    kind = file.direct ? IoPath::kPread : IoPath::kBuffered;
    if (o.path == IoPath::kPread) {
      why = with_direct_note("forced by --io pread");
    } else if (o.path == IoPath::kBuffered) {
      why = "forced by --io buffered";
    } else if (!file.direct) {
      why = why_not_direct;
    }
  }
  auto reader = std::make_unique<ChunkedReader>(kind, std::move(file), std::move(backend), o);
  log_choice_once(path, reader->description(), why);
  return std::unique_ptr<Reader>(std::move(reader));
}

}  // namespace layerstream::io

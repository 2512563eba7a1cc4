#include "io/chunked_reader.h"

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <fmt/format.h>

#include "io/io_hooks.h"
#include "layerstream/units.h"

namespace layerstream::io {

ChunkedReader::ChunkedReader(IoPath kind, OpenedFile file, std::unique_ptr<ReadBackend> backend,
                             const ReaderOptions& options)
    : kind_(kind),
      file_(std::move(file)),
      backend_(std::move(backend)),
      hooks_(options.hooks),
      chunk_bytes_(options.chunk_bytes),
      bounce_bytes_(options.bounce_bytes),
      slots_(options.queue_depth) {
  free_slots_.reserve(slots_.size());
  for (unsigned i = static_cast<unsigned>(slots_.size()); i-- > 0;) free_slots_.push_back(i);
}

ChunkedReader::~ChunkedReader() {
  cancel();
  backend_.reset();  // joins workers / tears down the ring before the fd closes
}

std::string ChunkedReader::description() const {
  return fmt::format("{}, {}, align {}, qd {}, chunk {}", backend_->name(), file_.direct ? "O_DIRECT" : "buffered",
                     file_.offset_align, slots_.size(), format_bytes(chunk_bytes_));
}

Status ChunkedReader::register_buffers(std::span<const iovec> buffers) {
  if (in_flight_ != 0 || !requests_.empty()) {
    return Status::InvalidArgument(fmt::format("register_buffers on {} with {} requests outstanding; it needs none",
                                               file_.path, requests_.size()));
  }
  return backend_->register_buffers(buffers);
}

Status ChunkedReader::submit(const ReadRequest& r) {
  if (!backend_error_.ok()) return backend_error_;
  const size_t a = file_.offset_align;
  auto bad = [&](std::string what) {
    return Status::InvalidArgument(fmt::format("read of {} at offset {} ({} bytes): {}", file_.path, r.offset, r.bytes,
                                               what));
  };
  if (r.dst == nullptr) return bad("null destination");
  if (r.bytes == 0) return bad("zero bytes");
  if (r.offset % a != 0 || r.bytes % a != 0) {
    return bad(fmt::format("offset and length must be multiples of the alignment {}", a));
  }
  if (reinterpret_cast<uintptr_t>(r.dst) % file_.memory_align != 0) {
    return bad(fmt::format("buffer {} is not aligned to {}", r.dst, file_.memory_align));
  }
  if (r.offset >= file_.size) return bad(fmt::format("offset is at or past the end of the file ({} bytes)", file_.size));
  if (r.bytes > UINT64_MAX - r.offset) return bad("offset + length overflows");
  uint64_t aligned_size = (file_.size + a - 1) / a * a;
  Request rq;
  rq.req = r;
  rq.issue_end = std::min<uint64_t>(r.offset + r.bytes, aligned_size);
  rq.next_issue = r.offset;
  requests_.emplace(next_id_++, std::move(rq));
  pump();
  Status st = backend_->flush();
  if (!st.ok()) backend_error_ = st;
  return st;
}

void ChunkedReader::pump() {
  std::vector<unsigned> retry;
  retry.swap(retry_slots_);
  for (unsigned s : retry) {
    if (requests_.at(slots_[s].request_id).error.ok() && !cancelling_) {
      issue_slot(s);
    } else {
      finish_chunk(s);
    }
  }
  if (cancelling_) return;
  for (auto it = requests_.begin(); it != requests_.end() && !free_slots_.empty();) {
    uint64_t id = it->first;
    Request& rq = it->second;
    ++it;  // issue_slot may complete and erase this request
    while (rq.error.ok() && rq.next_issue < rq.issue_end && !free_slots_.empty()) {
      unsigned s = free_slots_.back();
      free_slots_.pop_back();
      Slot& slot = slots_[s];
      slot.busy = true;
      slot.request_id = id;
      slot.offset = rq.next_issue;
      slot.len = static_cast<size_t>(std::min<uint64_t>(chunk_bytes_, rq.issue_end - rq.next_issue));
      slot.expected = static_cast<size_t>(std::min<uint64_t>(slot.len, file_.size - slot.offset));
      slot.done = 0;
      slot.retries = 0;
      slot.dst = static_cast<uint8_t*>(rq.req.dst) + (slot.offset - rq.req.offset);
      rq.next_issue += slot.len;
      ++rq.chunks_in_flight;
      issue_slot(s);  // on failure completes (and erases) the request
      if (requests_.find(id) == requests_.end()) break;
    }
  }
}

void ChunkedReader::issue_slot(unsigned s) {
  Slot& slot = slots_[s];
  Status st = backend_->issue(s, slot.offset + slot.done, slot.len - slot.done, slot.dst + slot.done);
  if (!st.ok()) {
    fail_request(requests_.at(slot.request_id), st.WithContext(fmt::format("read {} at offset {}", file_.path, slot.offset)));
    finish_chunk(s);
    return;
  }
  ++in_flight_;
}

void ChunkedReader::fail_request(Request& rq, Status s) {
  if (rq.error.ok()) rq.error = std::move(s);
}

void ChunkedReader::finish_chunk(unsigned s) {
  Slot& slot = slots_[s];
  slot.busy = false;
  free_slots_.push_back(s);
  uint64_t id = slot.request_id;
  --requests_.at(id).chunks_in_flight;
  maybe_complete(id);
}

void ChunkedReader::maybe_complete(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& rq = it->second;
  if (rq.chunks_in_flight != 0) return;
  if (rq.error.ok() && rq.next_issue < rq.issue_end) return;
  done_.push_back({rq.req.tag, rq.error.ok() ? rq.bytes_read : 0, rq.error});
  requests_.erase(it);
}

void ChunkedReader::handle_result(const RawResult& r) {
  --in_flight_;
  Slot& slot = slots_[r.slot];
  const uint64_t at = slot.offset + slot.done;
  const size_t want = slot.len - slot.done;
  int64_t res = r.result;
  if (hooks_) hooks_->after_read(at, want, res);
  Request& rq = requests_.at(slot.request_id);
  if (cancelling_ || !rq.error.ok()) {
    finish_chunk(r.slot);
    return;
  }
  auto retry_or_fail = [&](const char* why) {
    if (++slot.retries > kMaxRetries) {
      fail_request(rq, Status::IOError(fmt::format("read {} at offset {} ({} bytes): {} {} times in a row, giving up",
                                                   file_.path, at, want, why, slot.retries)));
      finish_chunk(r.slot);
    } else {
      retry_slots_.push_back(r.slot);
    }
  };
  if (res < 0) {
    int err = static_cast<int>(-res);
    if (err == EINTR || err == EAGAIN) {
      retry_or_fail(err == EINTR ? "EINTR" : "EAGAIN");
      return;
    }
    fail_request(rq, Status::FromErrno(fmt::format("read {} at offset {} ({} bytes)", file_.path, at, want), err));
    finish_chunk(r.slot);
    return;
  }
  if (res == 0) {
    fail_request(rq, Status::IOError(fmt::format(
                         "read {} at offset {}: unexpected end of file (the file was {} bytes when opened; truncated?)",
                         file_.path, at, file_.size)));
    finish_chunk(r.slot);
    return;
  }
  size_t now_done = slot.done + std::min<size_t>(static_cast<size_t>(res), want);
  if (now_done >= slot.expected) {
    rq.bytes_read += slot.expected;
    finish_chunk(r.slot);
    return;
  }
  // Short read: keep what arrived (rounded down to the alignment for O_DIRECT)
  // and read the rest.
  size_t keep = file_.direct ? now_done / file_.offset_align * file_.offset_align : now_done;
  if (keep > slot.done) {
    slot.done = keep;
    slot.retries = 0;
    retry_slots_.push_back(r.slot);
  } else {
    retry_or_fail("short read without progress");
  }
}

Result<size_t> ChunkedReader::wait_impl(std::span<ReadCompletion> out, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + (timeout.count() < 0 ? std::chrono::milliseconds(0) : timeout);
  for (;;) {
    if (!done_.empty()) return take_front(done_, out);
    if (!backend_error_.ok()) return backend_error_;
    pump();
    if (Status st = backend_->flush(); !st.ok()) {
      backend_error_ = st;
      return st;
    }
    if (!done_.empty()) continue;
    if (in_flight_ == 0) return size_t{0};  // nothing outstanding
    std::chrono::milliseconds left = kWaitForever;
    if (timeout.count() >= 0) {
      left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return size_t{0};
    }
    scratch_.clear();
    if (Status st = backend_->reap(scratch_, left); !st.ok()) {
      backend_error_ = st.WithContext("reading " + file_.path);
      return backend_error_;
    }
    for (const RawResult& r : scratch_) handle_result(r);
  }
}

void ChunkedReader::cancel() {
  if (requests_.empty()) return;
  cancelling_ = true;
  for (auto& [id, rq] : requests_) {
    fail_request(rq, Status::Cancelled(fmt::format("read of {} at offset {} ({} bytes) cancelled", file_.path,
                                                   rq.req.offset, rq.req.bytes)));
  }
  pump();  // releases chunks waiting for a retry
  if (in_flight_ > 0) backend_->cancel_all();
  while (in_flight_ > 0) {
    scratch_.clear();
    Status st = backend_->reap(scratch_, std::chrono::milliseconds(1000));
    if (!st.ok()) {
      // The ring broke: nothing more will arrive. Leave buffers marked in flight.
      backend_error_ = st;
      break;
    }
    for (const RawResult& r : scratch_) handle_result(r);
  }
  std::vector<uint64_t> ids;
  for (auto& [id, rq] : requests_) ids.push_back(id);
  for (uint64_t id : ids) maybe_complete(id);
  cancelling_ = false;
}

}  // namespace layerstream::io

// ChunkedReader: the Reader implementation shared by every path. It splits
// requests into aligned chunks, keeps at most queue_depth of them in flight on
// a ReadBackend, resubmits short reads, retries EINTR/EAGAIN and turns other
// errors into IOErrors naming the file, offset and errno. Internal to io/;
// callers get it from open_reader().
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/file_handle.h"
#include "io/read_backend.h"
#include "io/reader.h"

namespace layerstream::io {

class ChunkedReader final : public Reader {
 public:
  // `options` must be validated (queue_depth, chunk_bytes in range).
  ChunkedReader(IoPath kind, OpenedFile file, std::unique_ptr<ReadBackend> backend, const ReaderOptions& options);
  ~ChunkedReader() override;

  IoPath kind() const override { return kind_; }
  const std::string& file_path() const override { return file_.path; }
  uint64_t file_size() const override { return file_.size; }
  bool direct() const override { return file_.direct; }
  size_t alignment() const override { return file_.offset_align; }
  size_t memory_alignment() const override { return file_.memory_align; }
  unsigned queue_depth() const override { return static_cast<unsigned>(slots_.size()); }
  size_t chunk_bytes() const override { return chunk_bytes_; }
  std::string description() const override;
  Status register_buffers(std::span<const iovec> buffers) override;
  Status submit(const ReadRequest& request) override;
  void cancel() override;

  // Consecutive EINTR/EAGAIN/no-progress results tolerated per chunk before
  // the request fails.
  static constexpr unsigned kMaxRetries = 64;

 protected:
  Result<size_t> wait_impl(std::span<ReadCompletion> out, std::chrono::milliseconds timeout) override;
  size_t outstanding_impl() const override { return requests_.size() + done_.size(); }
  size_t bounce_bytes() const override { return bounce_bytes_; }

 private:
  struct Request {
    ReadRequest req;
    uint64_t issue_end = 0;   // reads cover [req.offset, issue_end), clipped to the aligned file end
    uint64_t next_issue = 0;  // first byte not yet given to a chunk
    unsigned chunks_in_flight = 0;
    size_t bytes_read = 0;
    Status error;             // first failure
  };
  struct Slot {
    bool busy = false;
    uint64_t request_id = 0;
    uint64_t offset = 0;      // file offset of the chunk
    size_t len = 0;           // bytes asked for (aligned)
    size_t expected = 0;      // bytes that exist in the file
    size_t done = 0;          // bytes known good from the start of the chunk
    unsigned retries = 0;     // consecutive results without progress
    uint8_t* dst = nullptr;   // buffer for the chunk start
  };

  // Issues retried chunks, then new chunks, while slots are free.
  void pump();
  void issue_slot(unsigned slot);
  void handle_result(const RawResult& r);
  void finish_chunk(unsigned slot);
  void fail_request(Request& rq, Status s);
  void maybe_complete(uint64_t id);

  IoPath kind_;
  OpenedFile file_;
  std::unique_ptr<ReadBackend> backend_;
  IoHooks* hooks_;
  size_t chunk_bytes_;
  size_t bounce_bytes_;
  std::vector<Slot> slots_;
  std::vector<unsigned> free_slots_;
  std::vector<unsigned> retry_slots_;
  unsigned in_flight_ = 0;
  std::map<uint64_t, Request> requests_;  // by id, i.e. submission order
  uint64_t next_id_ = 0;
  std::deque<ReadCompletion> done_;
  std::vector<RawResult> scratch_;
  bool cancelling_ = false;
  Status backend_error_;  // sticky: the backend itself failed
};

}  // namespace layerstream::io

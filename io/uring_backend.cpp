#include "io/uring_backend.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "io/io_hooks.h"
#include "runtime/core/status_macros.h"

namespace layerstream::io {
namespace {

constexpr uint64_t kCancelTag = ~uint64_t{0};

class UringBackend final : public ReadBackend {
 public:
  UringBackend(int fd, unsigned entries) : fd_(fd), entries_(entries) {}
  ~UringBackend() override {
    if (initialized_) io_uring_queue_exit(&ring_);
  }

  // Returns 0 or a positive errno.
  int init(IoHooks* hooks) {
    if (hooks) {
      if (int err = hooks->before_uring_setup()) return err;
    }
    int ret = io_uring_queue_init(entries_, &ring_, 0);
    if (ret < 0) return -ret;
    initialized_ = true;
    // A registered file saves an fget/fput per I/O; optional (old kernels, limits).
    if (io_uring_register_files(&ring_, &fd_, 1) == 0) fixed_file_ = true;
    return 0;
  }

  Status issue(unsigned slot, uint64_t offset, size_t len, void* dst) override {
    io_uring_sqe* sqe = get_sqe();
    if (!sqe) return Status::Internal("io_uring submission queue full");
    int buf_index = find_fixed_buffer(dst, len);
    int fd = fixed_file_ ? 0 : fd_;
    if (buf_index >= 0) {
      io_uring_prep_read_fixed(sqe, fd, dst, static_cast<unsigned>(len), offset, buf_index);
    } else {
      io_uring_prep_read(sqe, fd, dst, static_cast<unsigned>(len), offset);
    }
    if (fixed_file_) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, slot);
    return Status::OK();
  }

  Status flush() override {
    while (io_uring_sq_ready(&ring_) > 0) {
      int ret = io_uring_submit(&ring_);
      if (ret == -EINTR || ret == -EAGAIN || ret == -EBUSY) {
        if (ret != -EINTR) return Status::OK();  // completions must be reaped first; reap resubmits
        continue;
      }
      if (ret < 0) return Status::FromErrno("io_uring_submit", -ret);
    }
    return Status::OK();
  }

  Status reap(std::vector<RawResult>& out, std::chrono::milliseconds timeout) override {
    LS_RETURN_IF_ERROR(flush());
    io_uring_cqe* cqe = nullptr;
    int ret;
    if (timeout.count() < 0) {
      ret = io_uring_wait_cqe(&ring_, &cqe);
    } else {
      __kernel_timespec ts{};
      ts.tv_sec = timeout.count() / 1000;
      ts.tv_nsec = (timeout.count() % 1000) * 1000000;
      ret = io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
    }
    if (ret == -ETIME || ret == -EINTR || ret == -EAGAIN) return Status::OK();
    if (ret < 0) return Status::FromErrno("io_uring_wait_cqe", -ret);
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      uint64_t tag = io_uring_cqe_get_data64(cqe);
      if (tag == kCancelTag) continue;
      out.push_back({static_cast<unsigned>(tag), cqe->res});
    }
    io_uring_cq_advance(&ring_, seen);
    return Status::OK();
  }

  void cancel_all() override {
    io_uring_sqe* sqe = get_sqe();
    if (!sqe) return;
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data64(sqe, kCancelTag);
    (void)flush();
  }

  Status register_buffers(std::span<const iovec> buffers) override {
    if (!buffers_.empty()) {
      io_uring_unregister_buffers(&ring_);
      buffers_.clear();
    }
    if (buffers.empty()) return Status::OK();
    int ret = io_uring_register_buffers(&ring_, buffers.data(), static_cast<unsigned>(buffers.size()));
    if (ret < 0) return Status::FromErrno("io_uring_register_buffers (" + std::to_string(buffers.size()) + " buffers)", -ret);
    buffers_.assign(buffers.begin(), buffers.end());
    return Status::OK();
  }

  std::string name() const override { return fixed_file_ ? "io_uring" : "io_uring (unregistered file)"; }

 private:
  io_uring_sqe* get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {
      (void)io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  int find_fixed_buffer(const void* dst, size_t len) const {
    auto p = reinterpret_cast<uintptr_t>(dst);
    for (size_t i = 0; i < buffers_.size(); ++i) {
      auto b = reinterpret_cast<uintptr_t>(buffers_[i].iov_base);
      if (p >= b && p + len <= b + buffers_[i].iov_len) return static_cast<int>(i);
    }
    return -1;
  }

  io_uring ring_{};
  int fd_;
  unsigned entries_;
  bool initialized_ = false;
  bool fixed_file_ = false;
  std::vector<iovec> buffers_;
};

}  // namespace

Result<std::unique_ptr<ReadBackend>> make_uring_backend(int fd, unsigned queue_depth, IoHooks* hooks,
                                                        int* setup_errno) {
  // One spare entry for the cancel request.
  auto backend = std::make_unique<UringBackend>(fd, queue_depth + 1);
  int err = backend->init(hooks);
  if (setup_errno) *setup_errno = err;
  if (err != 0) return Status::FromErrno("io_uring setup", err);
  return std::unique_ptr<ReadBackend>(std::move(backend));
}

}  // namespace layerstream::io

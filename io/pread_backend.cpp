#include "io/pread_backend.h"

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace layerstream::io {
namespace {

class PreadBackend final : public ReadBackend {
 public:
  PreadBackend(int fd, unsigned threads) : fd_(fd) {
    workers_.reserve(threads);
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
  }

  ~PreadBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  Status issue(unsigned slot, uint64_t offset, size_t len, void* dst) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      work_.push_back({slot, offset, len, dst});
    }
    work_cv_.notify_one();
    return Status::OK();
  }

  Status reap(std::vector<RawResult>& out, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [this] { return !results_.empty(); };
    if (timeout.count() < 0) {
      done_cv_.wait(lock, ready);
    } else {
      done_cv_.wait_for(lock, timeout, ready);
    }
    out.insert(out.end(), results_.begin(), results_.end());
    results_.clear();
    return Status::OK();
  }

  void cancel_all() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const Work& w : work_) results_.push_back({w.slot, -ECANCELED});
      work_.clear();
    }
    done_cv_.notify_all();
  }

  std::string name() const override { return "pread pool, " + std::to_string(workers_.size()) + " threads"; }

 private:
  struct Work {
    unsigned slot;
    uint64_t offset;
    size_t len;
    void* dst;
  };

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [this] { return stop_ || !work_.empty(); });
      if (stop_) return;
      Work w = work_.front();
      work_.pop_front();
      lock.unlock();
      ssize_t n = ::pread(fd_, w.dst, w.len, static_cast<off_t>(w.offset));
      int64_t res = n < 0 ? -int64_t{errno} : static_cast<int64_t>(n);
      lock.lock();
      results_.push_back({w.slot, res});
      done_cv_.notify_all();
    }
  }

  const int fd_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Work> work_;
  std::vector<RawResult> results_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

std::unique_ptr<ReadBackend> make_pread_backend(int fd, unsigned threads) {
  return std::make_unique<PreadBackend>(fd, threads);
}

}  // namespace layerstream::io

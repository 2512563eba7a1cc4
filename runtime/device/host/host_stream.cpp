#include "runtime/device/host/host_stream.h"

#include <cstring>
#include <exception>

#include "runtime/core/status_macros.h"
#include "runtime/device/host/host_event.h"

namespace layerstream::host {

HostStream::HostStream(StreamRole role, std::shared_ptr<SimLink> link,
                       std::shared_ptr<const MemoryRanges> ranges, bool waits_carry_errors)
    : name_(role == StreamRole::kCopy ? "copy stream" : "compute stream"),
      link_(std::move(link)),
      ranges_(std::move(ranges)),
      waits_carry_errors_(waits_carry_errors) {
  worker_ = std::thread([this] { worker_loop(); });
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

void HostStream::execute(Task& task) {
  Status sticky;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sticky = sticky_;
  }
  if (!sticky.ok()) {
    if (task.skip) task.skip(sticky);
  } else {
    Status s;
    try {
      s = task.run();
    } catch (const std::exception& e) {
      s = Status::Internal(std::string("exception in stream work: ") + e.what());
    } catch (...) {
      s = Status::Internal("unknown exception in stream work");
    }
    if (!s.ok()) {
      std::lock_guard<std::mutex> g(mu_);
      if (sticky_.ok()) sticky_ = s.WithContext(name_);
    }
  }
  task = Task{};  // drop captures before reporting idle
}

void HostStream::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    execute(task);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

Status HostStream::enqueue(Task task) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!sticky_.ok()) return sticky_.WithContext("stream failed earlier");
  if (!on_caller_) {
    queue_.push_back(std::move(task));
    lock.unlock();
    work_cv_.notify_one();
    return Status::OK();
  }
  // After anything queued before the switch, and one caller at a time.
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  busy_ = true;
  lock.unlock();
  execute(task);
  lock.lock();
  busy_ = false;
  idle_cv_.notify_all();
  return Status::OK();
}

bool HostStream::set_run_on_caller(bool on) {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  on_caller_ = on;
  return true;
}

Status HostStream::copy_h2d(void* dst_device, const void* src_host, size_t bytes) {
  if (bytes == 0) return Status::OK();
  if (src_host == nullptr) return Status::InvalidArgument("copy_h2d source is a null pointer");
  LS_RETURN_IF_ERROR(ranges_->check(dst_device, bytes, "copy_h2d destination"));
  return enqueue({[link = link_, dst_device, src_host, bytes] {
                    link->copy(dst_device, src_host, bytes);
                    return Status::OK();
                  },
                  nullptr});
}

Status HostStream::copy_d2h(void* dst_host, const void* src_device, size_t bytes) {
  if (bytes == 0) return Status::OK();
  if (dst_host == nullptr) return Status::InvalidArgument("copy_d2h destination is a null pointer");
  LS_RETURN_IF_ERROR(ranges_->check(src_device, bytes, "copy_d2h source"));
  return enqueue({[=] {
                    std::memcpy(dst_host, src_device, bytes);
                    return Status::OK();
                  },
                  nullptr});
}

Status HostStream::copy_d2d(void* dst_device, const void* src_device, size_t bytes) {
  if (bytes == 0) return Status::OK();
  LS_RETURN_IF_ERROR(ranges_->check(dst_device, bytes, "copy_d2d destination"));
  LS_RETURN_IF_ERROR(ranges_->check(src_device, bytes, "copy_d2d source"));
  LS_RETURN_IF_ERROR(check_no_overlap(dst_device, src_device, bytes, "copy_d2d"));
  return enqueue({[=] {
                    std::memcpy(dst_device, src_device, bytes);
                    return Status::OK();
                  },
                  nullptr});
}

Status HostStream::record(Event& event) {
  auto* ev = dynamic_cast<HostEvent*>(&event);
  if (ev == nullptr) return Status::InvalidArgument("record: the event belongs to another backend");
  std::shared_ptr<Completion> c = ev->begin_record();
  Status s = enqueue({[c] {
                        c->complete(Status::OK(), Clock::now());
                        return Status::OK();
                      },
                      [c](const Status& sticky) { c->complete(sticky, Clock::now()); }});
  if (!s.ok()) c->complete(s, Clock::now());
  return s;
}

Status HostStream::wait(const Event& event) {
  const auto* ev = dynamic_cast<const HostEvent*>(&event);
  if (ev == nullptr) return Status::InvalidArgument("wait: the event belongs to another backend");
  std::shared_ptr<Completion> c = ev->current();
  if (!c) return Status::OK();  // never recorded: complete
  return enqueue({[c, carry = waits_carry_errors_] {
                    Status s = c->wait();
                    if (!carry) return Status::OK();
                    return s.ok() ? s : s.WithContext("waited-on event's work failed");
                  },
                  nullptr});
}

Status HostStream::host_func(std::function<Status()> fn) {
  if (!fn) return Status::InvalidArgument("host_func: empty function");
  {
    // Run on the caller (resident passes: a decode step is hundreds of
    // these): fn at once, without wrapping it in a Task, as enqueue's
    // on-caller branch and execute() would.
    std::unique_lock<std::mutex> lock(mu_);
    if (on_caller_) {
      if (!sticky_.ok()) return sticky_.WithContext("stream failed earlier");
      idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
      busy_ = true;
      lock.unlock();
      Status st;
      try {
        st = fn();
        if (!st.ok()) st = st.WithContext("host_func");
      } catch (const std::exception& e) {
        st = Status::Internal(std::string("exception in stream work: ") + e.what());
      } catch (...) {
        st = Status::Internal("unknown exception in stream work");
      }
      fn = nullptr;  // drop captures before reporting idle
      lock.lock();
      if (!st.ok() && sticky_.ok()) sticky_ = st.WithContext(name_);
      busy_ = false;
      idle_cv_.notify_all();
      return Status::OK();
    }
  }
  return enqueue({[fn = std::move(fn)] {
                    Status s = fn();
                    return s.ok() ? s : s.WithContext("host_func");
                  },
                  nullptr});
}

Status HostStream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  return sticky_;
}

}  // namespace layerstream::host

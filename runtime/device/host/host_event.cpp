#include "runtime/device/host/host_event.h"

namespace layerstream::host {

void Completion::complete(Status error, Clock::time_point at) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
    at_ = at;
  }
  cv_.notify_all();
}

Status Completion::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return error_;
}

bool Completion::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

Clock::time_point Completion::at() const {
  std::lock_guard<std::mutex> lock(mu_);
  return at_;
}

Status Completion::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::shared_ptr<Completion> HostEvent::begin_record() {
  auto c = std::make_shared<Completion>();
  std::lock_guard<std::mutex> lock(mu_);
  current_ = c;
  return c;
}

std::shared_ptr<Completion> HostEvent::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

Status HostEvent::synchronize() {
  auto c = current();
  if (!c) return Status::OK();
  Status s = c->wait();
  return s.ok() ? s : s.WithContext("event: the recorded work failed");
}

Result<bool> HostEvent::query() {
  auto c = current();
  if (!c) return true;
  if (!c->done()) return false;
  Status s = c->error();
  if (!s.ok()) return s.WithContext("event: the recorded work failed");
  return true;
}

Result<double> HostEvent::elapsed_ms_since(const Event& start) const {
  const auto* other = dynamic_cast<const HostEvent*>(&start);
  if (other == nullptr) {
    return Status::InvalidArgument("elapsed_ms_since: the start event belongs to another backend");
  }
  auto end_c = current();
  auto start_c = other->current();
  if (!end_c || !start_c) {
    return Status::InvalidArgument(std::string("elapsed_ms_since: the ") + (!start_c ? "start" : "end") +
                                   " event was never recorded");
  }
  if (!end_c->done() || !start_c->done()) {
    return Status::InvalidArgument(std::string("elapsed_ms_since: the ") + (!start_c->done() ? "start" : "end") +
                                   " event has not completed yet (synchronize it first)");
  }
  for (const auto& c : {start_c, end_c}) {
    Status s = c->error();
    if (!s.ok()) return s.WithContext("elapsed_ms_since: the recorded work failed");
  }
  return std::chrono::duration<double, std::milli>(end_c->at() - start_c->at()).count();
}

}  // namespace layerstream::host

#include "io/fault_injection.h"

#include <cerrno>

namespace layerstream::io {

void FaultInjector::add(const FaultRule& rule) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back({rule});
}

void FaultInjector::fail_uring_setup(int err) {
  std::lock_guard<std::mutex> lock(mu_);
  uring_err_ = err;
}

void FaultInjector::fail_direct_open(int err) {
  std::lock_guard<std::mutex> lock(mu_);
  direct_err_ = err;
}

uint64_t FaultInjector::injected(FaultKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  return injected_[static_cast<int>(kind)];
}

uint64_t FaultInjector::reads_seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reads_;
}

int FaultInjector::before_uring_setup() {
  std::lock_guard<std::mutex> lock(mu_);
  return uring_err_;
}

int FaultInjector::before_open(const std::string& path, bool direct) {
  std::lock_guard<std::mutex> lock(mu_);
  return direct ? direct_err_ : 0;
}

void FaultInjector::after_read(uint64_t offset, size_t requested, int64_t& result) {
  std::lock_guard<std::mutex> lock(mu_);
  ++reads_;
  for (Rule& r : rules_) {
    if (offset < r.spec.offset_begin || offset >= r.spec.offset_end || r.fired >= r.spec.count) continue;
    if (r.matched++ < r.spec.skip) continue;
    switch (r.spec.kind) {
      case FaultKind::kShortRead: {
        size_t to = r.spec.short_bytes ? r.spec.short_bytes : requested / 2;
        if (result <= 0 || static_cast<uint64_t>(result) <= to) continue;  // nothing to shorten
        result = static_cast<int64_t>(to);
        break;
      }
      case FaultKind::kEintr: result = -EINTR; break;
      case FaultKind::kEagain: result = -EAGAIN; break;
      case FaultKind::kEio: result = -EIO; break;
    }
    ++r.fired;
    ++injected_[static_cast<int>(r.spec.kind)];
    return;  // one fault per read
  }
}

}  // namespace layerstream::io

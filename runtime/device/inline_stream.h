// InlineStream: a Stream that does its work at once on the calling thread
// (copies are memcpy, host functions run immediately, the first error is
// kept for synchronize()). For tests and benchmarks that drive the CPU
// kernels, or check a device against them, without a stream thread.
// Thread safety: one thread at a time.
#pragma once

#include <cstring>
#include <functional>
#include <utility>

#include "layerstream/status.h"
#include "runtime/device/device.h"

namespace layerstream {

// Runs host functions at once, on the calling thread; keeps the first error.
class InlineStream final : public Stream {
 public:
  Status copy_h2d(void* d, const void* s, size_t n) override { return copy(d, s, n); }
  Status copy_d2h(void* d, const void* s, size_t n) override { return copy(d, s, n); }
  Status copy_d2d(void* d, const void* s, size_t n) override { return copy(d, s, n); }
  Status record(Event&) override { return Status::OK(); }
  Status wait(const Event&) override { return Status::OK(); }
  Status host_func(std::function<Status()> fn) override {
    Status s = fn();
    if (!s.ok() && error_.ok()) error_ = s;
    return Status::OK();
  }
  Status synchronize() override { return std::exchange(error_, Status::OK()); }
  void* native_handle() override { return nullptr; }

 private:
  static Status copy(void* d, const void* s, size_t n) {
    std::memcpy(d, s, n);
    return Status::OK();
  }
  Status error_;
};

}  // namespace layerstream

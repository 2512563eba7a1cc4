// Host backend events: each record() creates a fresh Completion that the
// recording stream's worker fulfils (with a steady_clock timestamp, or the
// stream's error when the work was skipped). Waiters hold the Completion of
// the record they saw, so a later re-record never changes what they wait for.
// Thread safety: Completion is internally locked; HostEvent guards its
// current Completion so one thread may record while another waits.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "runtime/device/device.h"

namespace layerstream::host {

using Clock = std::chrono::steady_clock;

class Completion {
 public:
  // Marks the captured work done at `at`; `error` is non-OK when it was skipped or failed.
  void complete(Status error, Clock::time_point at);
  // Blocks until complete(); returns the error it was completed with.
  Status wait();
  bool done() const;
  // REQUIRES: done().
  Clock::time_point at() const;
  Status error() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status error_;
  Clock::time_point at_{};
};

class HostEvent final : public Event {
 public:
  Status synchronize() override;
  Result<bool> query() override;
  Result<double> elapsed_ms_since(const Event& start) const override;

  // Starts a new record: later waits see the returned Completion.
  std::shared_ptr<Completion> begin_record();
  // The Completion of the latest record; null when never recorded.
  std::shared_ptr<Completion> current() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<Completion> current_;
};

}  // namespace layerstream::host

// Host backend stream: one worker thread draining an in-order queue.
//
// Sticky errors: the first task that fails (a host_func returning an error, a
// wait on an event whose work failed) becomes the stream's error. Every task
// after it is skipped (events recorded after it complete with that error),
// later enqueue calls return it, and synchronize() keeps returning it.
// Thread safety: enqueue calls and synchronize() may come from any thread;
// work runs on the worker in enqueue order (or, after set_run_on_caller(true),
// on the enqueuing thread, one task at a time). Destruction drains the queue.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/device/device.h"
#include "runtime/device/host/sim_link.h"
#include "runtime/device/memory_ranges.h"

namespace layerstream::host {

class HostStream final : public Stream {
 public:
  // `waits_carry_errors`: a wait() on an event whose stream failed fails this
  // stream too (the host backend's default); false mimics cudaStreamWaitEvent,
  // which carries no error (DeviceOptions::copies_only).
  HostStream(StreamRole role, std::shared_ptr<SimLink> link, std::shared_ptr<const MemoryRanges> ranges,
             bool waits_carry_errors = true);
  ~HostStream() override;

  Status copy_h2d(void* dst_device, const void* src_host, size_t bytes) override;
  Status copy_d2h(void* dst_host, const void* src_device, size_t bytes) override;
  Status copy_d2d(void* dst_device, const void* src_device, size_t bytes) override;
  Status record(Event& event) override;
  Status wait(const Event& event) override;
  Status host_func(std::function<Status()> fn) override;
  Status synchronize() override;
  void* native_handle() override { return nullptr; }
  bool set_run_on_caller(bool on) override;

 private:
  struct Task {
    std::function<Status()> run;
    std::function<void(const Status&)> skip;  // called instead of run after a sticky error
  };
  Status enqueue(Task task);
  void worker_loop();
  // Runs (or, after a sticky error, skips) one task; records its error. Called
  // with mu_ not held and busy_ set by the caller.
  void execute(Task& task);

  const std::string name_;
  const std::shared_ptr<SimLink> link_;
  const std::shared_ptr<const MemoryRanges> ranges_;
  const bool waits_carry_errors_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<Task> queue_;
  bool busy_ = false;  // a task is running (on the worker or, on_caller_, an enqueuing thread)
  bool stop_ = false;
  bool on_caller_ = false;  // set_run_on_caller
  Status sticky_;
  std::thread worker_;
};

}  // namespace layerstream::host

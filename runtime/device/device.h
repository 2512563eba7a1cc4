// The device interface: everything the scheduler, kernels and executor need
// from a device, implemented by the cuda backend (runtime/device/cuda/) and
// the host backend (runtime/device/host/). Nothing outside runtime/device/
// includes a backend header.
//
// Ownership: a Device owns nothing it hands out; Streams, Events, Arenas and
// HostBuffers are owned by the caller (unique_ptr / value) and must be
// destroyed before the Device.
// Thread safety: a Device may be used from any thread. A Stream or Event is
// used by one host thread at a time (the scheduler's copy or compute thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "layerstream/options.h"
#include "layerstream/status.h"
#include "runtime/device/arena.h"

namespace layerstream {

// The public enum (layerstream/options.h): names and parsing are name_of and
// backend_from_name there.
using BackendKind = Backend;

struct DeviceInfo {
  BackendKind backend = BackendKind::kHost;
  std::string name;                 // "NVIDIA H200", "host (2 threads)"
  uint64_t total_memory_bytes = 0;  // device memory (host: physical RAM)
  uint64_t free_memory_bytes = 0;
  int copy_engines = 1;             // independent H2D/D2H engines
  bool host_addressable = false;    // device pointers may be read/written by the CPU
  double sim_link_gbps = 0;         // host backend throttle (0 = unthrottled)
};

// A point in a stream's work. Recorded on a stream, waited on by another
// stream or by the host. Timing: both events recorded and completed.
class Event {
 public:
  virtual ~Event() = default;
  // Blocks the calling thread until the work captured by the last record() is done.
  // An event never recorded counts as complete.
  virtual Status synchronize() = 0;
  // True when the captured work is complete.
  virtual Result<bool> query() = 0;
  // Milliseconds from `start` completing to this event completing (may be
  // negative if this one completed first). Both must be recorded and complete.
  virtual Result<double> elapsed_ms_since(const Event& start) const = 0;
};

// An in-order queue of device work. All enqueue calls return immediately
// (after validating arguments); errors from the work itself surface at the
// next synchronize() or Event::synchronize().
class Stream {
 public:
  virtual ~Stream() = default;
  // Copies host -> device. `src` must stay valid and unchanged until the copy
  // completes; it should be pinned (Device::alloc_pinned) for a real async copy.
  virtual Status copy_h2d(void* dst_device, const void* src_host, size_t bytes) = 0;
  // Copies device -> host (small results: logits, sampled tokens).
  virtual Status copy_d2h(void* dst_host, const void* src_device, size_t bytes) = 0;
  // Copies device -> device within the arena.
  virtual Status copy_d2d(void* dst_device, const void* src_device, size_t bytes) = 0;
  // Captures all work enqueued so far.
  virtual Status record(Event& event) = 0;
  // Work enqueued after this call starts only once `event` completes.
  virtual Status wait(const Event& event) = 0;
  // Runs `fn` on a host thread, in stream order (host: the stream's worker
  // thread; cuda: cudaLaunchHostFunc). fn must not call into the stream.
  // An error returned by fn becomes the stream's sticky error.
  virtual Status host_func(std::function<Status()> fn) = 0;
  // Blocks until all enqueued work is done; returns the first error it met.
  virtual Status synchronize() = 0;
  // cudaStream_t on the cuda backend, nullptr on the host backend.
  virtual void* native_handle() = 0;
  // Profiler ranges (NVTX on cuda, no-op on host) around copies and layer compute.
  virtual void range_push(const char* name) {}
  virtual void range_pop() {}
  // When `on`, work enqueued from now on runs at once on the enqueuing thread
  // instead of the stream's own (same order, same sticky errors; a wait()
  // blocks the caller until its event completes). For a stream whose owner
  // enqueues a whole pass and then synchronizes, with nothing to overlap: the
  // host backend then skips two thread hand-offs per pass (the worker's
  // wake-up, then the waiting caller's). Waits for queued work first. Returns
  // whether the stream honours it (cuda: no, the call does nothing).
  virtual bool set_run_on_caller(bool on) {
    (void)on;
    return false;
  }
};

// Page-locked host memory owned by the caller. Moves, never copies.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(void* data, size_t bytes, std::function<void(void*)> release)
      : data_(data), bytes_(bytes), release_(std::move(release)) {}
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    release_ = std::move(o.release_);
    return *this;
  }
  ~HostBuffer() { reset(); }
  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  void reset() {
    if (data_ && release_) release_(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> release_;
};

enum class StreamRole { kCompute, kCopy };

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  // One up-front allocation of `budget_bytes` of device memory, carved later.
  // OutOfBudget when the device cannot supply it (names request and free memory).
  virtual Result<std::unique_ptr<Arena>> create_arena(uint64_t budget_bytes) = 0;
  // Page-locked host memory (cudaHostAlloc / page-aligned RAM on host).
  virtual Result<HostBuffer> alloc_pinned(size_t bytes) = 0;
  // Pins memory the caller already owns (cudaHostRegister). Unpinned when the
  // returned handle is destroyed; the memory stays the caller's.
  virtual Result<HostBuffer> register_host(void* data, size_t bytes) = 0;
  virtual Result<std::unique_ptr<Stream>> create_stream(StreamRole role) = 0;
  virtual Result<std::unique_ptr<Event>> create_event() = 0;
};

struct DeviceOptions {
  BackendKind backend = BackendKind::kAuto;
  int cuda_device = 0;
  double sim_link_gbps = 0;  // host backend: throttle H2D copies to this rate (0 = off)
  int host_threads = 0;      // host backend compute threads (0 = hardware concurrency)
  // Host backend: device memory that only copies reach, as on a GPU
  // (DeviceInfo::host_addressable false), so the scheduler takes the staged
  // disk path it takes on CUDA; and, as with cudaStreamWaitEvent, a wait on
  // an event carries no error from the waited-on stream. (`--staging always`)
  bool copies_only = false;
};

// Opens the backend asked for. kAuto picks cuda when a device is present, else
// host, and logs which and why. kCuda without a device is an error that says why.
Result<std::unique_ptr<Device>> open_device(const DeviceOptions& options);

// OK when the CUDA backend is built and a CUDA device can be used; otherwise a
// status saying why not ("built without CUDA", "no CUDA device: <runtime's
// words>"). A missing driver counts as no device.
Status cuda_device_available();

}  // namespace layerstream

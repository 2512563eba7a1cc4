// DiskLoader: the executor's disk tier. One thread brings the disk-tier
// streamed layers of each pass into their window regions, in the order the
// pass loop posts them (executor.h describes the two paths):
//  - direct (host-addressable device memory): a layer is read straight into
//    its region once the compute it overwrites has finished;
//  - staged (device memory only copies reach; every GPU): chunks of a
//    staging buffer are read into the pinned staging ring with many reads in
//    flight over several layers, and each chunk's H2D copy is issued on the
//    disk-copy stream as it lands, in layer order (staged_disk_loop.cpp).
// The loader also owns the file readers: the executor reads through them
// (probe, resident and RAM-tier loads) only while the thread is idle (before
// start(), or with no job pending: after finish_or_drop_jobs()).
//
// Counters: the pass loop posts jobs (post), says which streamed layers'
// "done" events are recorded (set_done_recorded) and, on the direct path,
// which have finished computing (set_computed, from a host function on the
// compute stream); it waits for a layer's data (wait_ready). Streamed layers
// are numbered g within a plan epoch; counters hold "g + 1 of the latest".
//
// Thread safety: every method but the disk thread's own is called by the
// thread that calls Executor::run_pass, except set_computed (the compute
// stream's host function). The state they share is LS_GUARDED_BY(mu_).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "io/reader.h"
#include "io/staging_ring.h"
#include "runtime/core/annotated_mutex.h"
#include "runtime/device/device.h"
#include "runtime/scheduler/layer.h"
#include "runtime/scheduler/trace.h"

namespace layerstream::sched {

// One disk-tier streamed layer to bring into its window region.
struct DiskJob {
  uint64_t g = 0;          // global streamed index (this plan epoch)
  int layer = 0;
  uint8_t* dst = nullptr;  // the layer's region in the window
  int64_t need = -1;       // streamed layer whose compute must finish before dst is written
  uint64_t pass = 0;
  int slot_index = 0;      // for traces
  int k = 0;               // index among the plan's streamed layers (timing events)
  // Staged path: events the disk thread records / waits on (fixed while the
  // job is live: a new plan drains every job first).
  Event* loaded = nullptr;     // recorded after the layer's last copy
  Event* need_done = nullptr;  // compute of `need` done (nullptr: none)
  Event* k_start = nullptr;
  Event* k_end = nullptr;
};

// The reads the disk thread finished since they were last taken.
struct DiskReads {
  std::vector<TraceEvent> trace;                     // layer reads and (staged) chunk reads
  int max_in_flight = 0;                             // most reads in flight at once
};

struct DiskLoaderOptions {
  bool direct = true;                  // disk_reads_direct() for the device
  io::ReaderOptions reader;            // ExecutorOptions::reader
  uint64_t staging_buffer_bytes = 4 << 20;
  unsigned staging_buffers = 24;
  Stream* disk_copy = nullptr;         // staged path: the stream the chunks' copies go on
  std::chrono::steady_clock::time_point host_ref;  // trace times are microseconds since this
};

class DiskLoader {
 public:
  // `layers` and `spans` (slot spans) are the executor's; they must outlive the loader.
  DiskLoader(const std::vector<LayerSpec>& layers, const std::vector<uint64_t>& spans, DiskLoaderOptions options);
  // Stops and joins the thread (stop()), then cancels the readers.
  ~DiskLoader();
  DiskLoader(const DiskLoader&) = delete;
  DiskLoader& operator=(const DiskLoader&) = delete;

  // The reader of `path`, opened on first use (on the staged path with one
  // request per staging buffer, all of them in flight at once).
  // REQUIRES: the thread is idle (not started, or no job pending).
  Result<io::Reader*> reader_for(const std::string& path);
  // The staging ring for plans that read from disk on the staged path:
  // created (pinned through `device`, registered with the readers) the first
  // time, kept for the loader's life; with one event per buffer behind its
  // last copy. REQUIRES: the thread is idle.
  Status ensure_staging_ring(Device& device);

  void start();
  // Asks the thread to stop; waiters return Cancelled.
  void request_stop() LS_EXCLUDES(mu_);
  // request_stop(), then joins the thread.
  void stop() LS_EXCLUDES(mu_);

  // Hands a job to the thread.
  void post(const DiskJob& job) LS_EXCLUDES(mu_);
  // Waits until streamed layer g's data is in place or its copies are issued
  // (g + 1 <= the ready counter); the disk error, or Cancelled when stopping.
  Status wait_ready(uint64_t g) LS_EXCLUDES(mu_);
  // Streamed layers [0, count) have their "done" events recorded (staged:
  // their regions may be copied into once those complete).
  void set_done_recorded(uint64_t count) LS_EXCLUDES(mu_);
  // Streamed layers [0, count) finished computing (direct: their regions are free).
  void set_computed(uint64_t count) LS_EXCLUDES(mu_);
  // The first read error (OK when none).
  Status error() const LS_EXCLUDES(mu_);
  // Drops the staged jobs whose copies can never start (read ahead of the
  // compute frontier: the compute they wait for was never enqueued) and
  // waits until every posted job is finished or dropped (or an error, or a stop).
  void finish_or_drop_jobs() LS_EXCLUDES(mu_);
  // A new epoch of streamed-layer numbering. REQUIRES: no job pending.
  void reset_counters() LS_EXCLUDES(mu_);
  // The reads finished since the last call.
  DiskReads take_reads() LS_EXCLUDES(mu_);

 private:
  class StagedLoop;  // the staged path's state and steps (disk thread only; staged_disk_loop.cpp)

  void run_direct() LS_EXCLUDES(mu_);
  Status read_direct(const DiskJob& job, io::Reader& reader) LS_EXCLUDES(mu_);
  void run_staged() LS_EXCLUDES(mu_);
  void set_error(const Status& st, int layer) LS_EXCLUDES(mu_);
  // Waits until `counter` reaches at_least; the disk error, or Cancelled when stopping.
  Status wait_counter(uint64_t DiskLoader::*counter, uint64_t at_least) LS_EXCLUDES(mu_);
  double trace_us(std::chrono::steady_clock::time_point t) const;

  const std::vector<LayerSpec>& layers_;
  const std::vector<uint64_t>& spans_;
  const DiskLoaderOptions opt_;
  // Opened before the thread starts; used by it, and by the executor only while it is idle.
  std::map<std::string, std::unique_ptr<io::Reader>> readers_;
  std::unique_ptr<io::StagingRing> ring_;
  std::vector<std::unique_ptr<Event>> buf_done_;  // per staging buffer: its last H2D copy
  std::thread thread_;

  // State below is guarded by mu_ (shared by the pass loop's thread, the
  // disk thread and the compute stream's host functions).
  mutable Mutex mu_;
  std::condition_variable_any cv_;  // waits on mu_ itself (a Mutex, so the analysis sees it)
  std::deque<DiskJob> jobs_ LS_GUARDED_BY(mu_);  // posted, not yet taken by the disk thread
  uint64_t posted_ LS_GUARDED_BY(mu_) = 0;       // jobs posted
  uint64_t finished_ LS_GUARDED_BY(mu_) = 0;     // jobs fully issued (or abandoned)
  uint64_t done_recorded_ LS_GUARDED_BY(mu_) = 0;  // streamed layers whose "done" event is recorded (+1 past g)
  bool abandon_ LS_GUARDED_BY(mu_) = false;  // settle(): drop staged jobs whose copies can never start
  bool stop_ LS_GUARDED_BY(mu_) = false;
  Status error_ LS_GUARDED_BY(mu_);
  uint64_t computed_ LS_GUARDED_BY(mu_) = 0;  // direct: streamed layers whose compute finished (+1 past g)
  uint64_t ready_ LS_GUARDED_BY(mu_) = 0;     // disk layers whose data is in place or whose copies are issued (+1 past g)
  DiskReads reads_ LS_GUARDED_BY(mu_);
};

}  // namespace layerstream::sched

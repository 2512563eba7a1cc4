// Trace: every copy, disk read, compute and stall of the executor, with
// start/end (microseconds since the executor's time origin), layer, slot and
// pass; exported as Chrome trace-event JSON (opens in Perfetto / about:tracing)
// and summarised per pass.
// Thread safety: add() and the readers are internally locked.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "layerstream/status.h"

namespace layerstream::sched {

// kDiskRead spans a layer's whole read; kDiskChunk is one read request of it
// (staged path: one staging buffer), so overlapping chunks show the reads in flight.
// kHostCompute is a host-site layer's compute on the executor's host lane.
enum class TraceKind : uint8_t { kCompute, kCopy, kDiskRead, kStall, kCopyWait, kDiskChunk, kHostCompute };
// "compute", "copy", "disk", "stall", "copy-wait", "disk-chunk", "host-compute"
std::string_view trace_kind_name(TraceKind k);

struct TraceEvent {
  TraceKind kind = TraceKind::kCompute;
  int layer = -1;
  int slot = -1;         // -1: resident / none
  uint64_t pass = 0;
  double start_us = 0;
  double end_us = 0;
  uint64_t bytes = 0;    // copies and reads
};

// What one pass looked like against what was predicted.
struct PassSummary {
  uint64_t pass = 0;
  double measured_s = 0;
  double predicted_s = 0;
  double lower_bound_s = 0;          // max(sum compute, streamed bytes / link bw, disk)
  double overlap_efficiency = 0;     // lower_bound / measured
  double sum_compute_s = 0;
  uint64_t streamed_bytes = 0;
  uint64_t disk_bytes = 0;           // read from disk for this pass's layers
  double disk_s = 0;                 // wall time of those reads (first start to last end, summed over runs of overlapping reads)
  int max_reads_in_flight = 0;       // most disk read requests outstanding at once
  std::vector<double> stall_s;       // per layer: compute waiting for the layer's load
  double total_stall_s() const;
  std::string to_string() const;     // one line for logs
};

class TraceRecorder {
 public:
  // `max_events` caps memory (oldest kept, newer dropped and counted).
  explicit TraceRecorder(size_t max_events = 1 << 20);
  void set_enabled(bool on);
  bool enabled() const;
  void add(const TraceEvent& e);
  void set_layer_names(std::vector<std::string> names);
  std::vector<TraceEvent> events() const;
  size_t dropped() const;
  void clear();

  // Chrome trace-event JSON: {"traceEvents":[...], "displayTimeUnit":"ms"};
  // each event ph "X" with ts and dur in microseconds, pid 1, tid 1 compute /
  // 2 copy / 3 disk, name, and args {layer, slot, pass, bytes}; plus
  // thread_name metadata ("M") events.
  std::string chrome_json() const;
  Status write_chrome_json(const std::string& path) const;

 private:
  mutable std::mutex mu_;
  bool enabled_ = true;
  size_t max_events_;
  size_t dropped_ = 0;
  std::vector<TraceEvent> events_;
  std::vector<std::string> names_;
};

}  // namespace layerstream::sched

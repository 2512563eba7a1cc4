// Executor: measuring a finished pass. Per-layer compute and copy times come
// from the events the pass recorded (per pass parity) and become cost-model
// samples (from pass 1 on: pass 0 is cold) and trace events; the disk
// loader's reads give the disk rate; the summary sets the measured time
// beside the prediction for the plan in force and the lower bound.
#include <algorithm>
#include <utility>

#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/executor.h"

namespace layerstream::sched {

Status Executor::collect_pass(uint64_t pass, int cls) {
  PassStats st;
  LS_ASSIGN_OR_RETURN(const PassSpan span, collect_layer_times(pass, cls, st));
  collect_disk_reads(st);
  summarize_pass(st, cls, span);
  last_ = std::move(st);
  return collect_crossings(pass, cls);
}

// Microseconds from the executor's reference event to `e`.
Result<double> Executor::event_us(const Event& e) const {
  LS_ASSIGN_OR_RETURN(double ms, e.elapsed_ms_since(*ref_));
  return ms * 1e3;
}

// Each layer's compute time and stall (cost model from pass 1 on: pass 0 is
// cold), each streamed layer's copy, and their trace events.
Result<Executor::PassSpan> Executor::collect_layer_times(uint64_t pass, int cls, PassStats& st) {
  const int par = static_cast<int>(pass & 1);
  st.compute_s.assign(n_, 0);
  st.summary.pass = pass;
  st.summary.stall_s.assign(n_, 0);
  PassSpan span;
  LS_ASSIGN_OR_RETURN(span.begin_us, event_us(*pass_begin_[par]));
  double prev_end = span.begin_us;
  span.end_us = span.begin_us;
  for (int i = 0; i < n_; ++i) {
    const bool on_host = plan_.site(i) == Site::kHost;
    double a = 0, b = 0;
    if (on_host) {
      a = host_ts_[par][2 * i];
      b = host_ts_[par][2 * i + 1];
    } else {
      LS_ASSIGN_OR_RETURN(a, event_us(*c_start_[par][i]));
      LS_ASSIGN_OR_RETURN(b, event_us(*c_end_[par][i]));
    }
    double c = std::max(0.0, b - a) * 1e-6;
    st.compute_s[i] = c;
    const bool split = plan_.site(i) == Site::kSplit;
    // A split layer's span mixes both sites (and its joins): collect_crossings
    // takes its halves as reported; the trace shows its host half on the host lane.
    if (split) trace_.add({TraceKind::kHostCompute, i, -1, pass, host_ts_[par][2 * i], host_ts_[par][2 * i + 1], 0});
    if (pass > 0 && on_host) cost_.record_host_compute(i, cls, c);
    else if (pass > 0 && !split) cost_.record_compute(i, cls, c);  // pass 0 is cold (first touch): not a sample
    st.summary.sum_compute_s += c;
    double stall = std::max(0.0, a - prev_end);
    st.summary.stall_s[i] = stall * 1e-6;
    const int k = stream_index_[i];
    const int slot = k >= 0 ? static_cast<int>(((pass - epoch_pass_) * streamed_.size() + k) % plan_.slots) : -1;
    trace_.add({on_host ? TraceKind::kHostCompute : TraceKind::kCompute, i, slot, pass, a, b, 0});
    if (stall > 1.0) trace_.add({TraceKind::kStall, i, -1, pass, prev_end, a, 0});
    if (k >= 0) LS_RETURN_IF_ERROR(collect_layer_copy(i, k, pass, slot, st, span));
    prev_end = b;
    span.end_us = b;
  }
  return span;
}

// Streamed layer i (k-th streamed): the bytes it moved; its copy's rate (RAM
// tier) and trace event (direct disk reads have no copy events: the disk
// loader traces them).
Status Executor::collect_layer_copy(int i, int k, uint64_t pass, int slot, PassStats& st, PassSpan& span) {
  const int par = static_cast<int>(pass & 1);
  const bool split = plan_.site(i) == Site::kSplit;
  const uint64_t moved = split ? split_device_bytes(layers_[i], plan_.device_fraction(i)) : bytes_[i];
  st.summary.streamed_bytes += moved;
  const bool copied = plan_.tiers[i] == Tier::kRam || !disk_direct_;
  if (!copied) return Status::OK();
  LS_ASSIGN_OR_RETURN(double ka, event_us(*k_start_[par][k]));
  LS_ASSIGN_OR_RETURN(double kb, event_us(*k_end_[par][k]));
  if (plan_.tiers[i] == Tier::kRam) {
    span.ram_bytes += moved;
    if (pass > 0) cost_.record_link(moved, (kb - ka) * 1e-6);
  }
  trace_.add({TraceKind::kCopy, i, slot, pass, ka, kb, moved});
  return Status::OK();
}

// The disk thread's and the host lane's reads since the last pass: the disk
// rate is the bytes of the layer reads over the time the disk was busy (the union of the reads'
// intervals: staged reads of several layers overlap); their trace events.
void Executor::collect_disk_reads(PassStats& st) {
  DiskReads reads = disk_->take_reads();
  reads.trace.insert(reads.trace.end(), host_disk_reads_.begin(), host_disk_reads_.end());
  host_disk_reads_.clear();
  std::vector<std::pair<double, double>> iv;
  uint64_t read_bytes = 0;
  for (const TraceEvent& e : reads.trace)
    if (e.kind == TraceKind::kDiskRead) {
      iv.push_back({e.start_us, e.end_us});
      read_bytes += e.bytes;
    }
  std::sort(iv.begin(), iv.end());
  double busy_us = 0, cur_a = 0, cur_b = -1;
  for (auto [a, b] : iv) {
    if (a > cur_b) {
      if (cur_b > cur_a) busy_us += cur_b - cur_a;
      cur_a = a;
      cur_b = b;
    } else {
      cur_b = std::max(cur_b, b);
    }
  }
  if (cur_b > cur_a) busy_us += cur_b - cur_a;
  if (read_bytes > 0 && busy_us > 0) cost_.record_disk(read_bytes, busy_us * 1e-6);
  st.summary.disk_bytes = read_bytes;
  st.summary.disk_s = busy_us * 1e-6;
  st.summary.max_reads_in_flight = reads.max_in_flight;
  for (auto& e : reads.trace) trace_.add(e);
}

// Measured time, the prediction for the plan in force under the costs
// measured so far, the lower bound and the overlap efficiency.
void Executor::summarize_pass(PassStats& st, int cls, const PassSpan& span) {
  uint64_t disk_bytes = 0;
  for (int i = 0; i < n_; ++i)
    if (plan_.tiers[i] == Tier::kDisk && plan_.streamed(i)) disk_bytes += spans_[i];
  double link_bytes = static_cast<double>(span.ram_bytes);
  if (!disk_direct_)
    for (int i = 0; i < n_; ++i)
      if (plan_.tiers[i] == Tier::kDisk && plan_.streamed(i)) link_bytes += bytes_[i];
  PassSummary& s = st.summary;
  s.measured_s = (span.end_us - span.begin_us) * 1e-6;
  // The plan's own figure dates from when it was made, before this pass's
  // measurements (a plan kept fixed would otherwise never update it).
  Plan now = plan_;
  (void)evaluate_plan(planner_input(cls), now);
  s.predicted_s = now.predicted_pass_s;
  s.lower_bound_s = std::max({s.sum_compute_s, cost_.link_bw() > 0 ? link_bytes / cost_.link_bw() : 0.0,
                              cost_.disk_bw() > 0 ? disk_bytes / cost_.disk_bw() : 0.0});
  s.overlap_efficiency = s.measured_s > 0 ? s.lower_bound_s / s.measured_s : 0;
  LS_LOG_DEBUG("scheduler: {}", s.to_string());
}

}  // namespace layerstream::sched

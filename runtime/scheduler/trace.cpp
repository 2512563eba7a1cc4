#include "runtime/scheduler/trace.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace layerstream::sched {

std::string_view trace_kind_name(TraceKind k) {
  switch (k) {
    case TraceKind::kCompute: return "compute";
    case TraceKind::kCopy: return "copy";
    case TraceKind::kDiskRead: return "disk";
    case TraceKind::kDiskChunk: return "disk-chunk";
    case TraceKind::kHostCompute: return "host-compute";
    case TraceKind::kStall: return "stall";
    case TraceKind::kCopyWait: return "copy-wait";
  }
  return "?";
}

double PassSummary::total_stall_s() const {
  double s = 0;
  for (double x : stall_s) s += x;
  return s;
}

std::string PassSummary::to_string() const {
  return fmt::format(
      "pass {}: measured {:.3f} ms, predicted {:.3f} ms, lower bound {:.3f} ms, overlap efficiency "
      "{:.1f}%, compute {:.3f} ms, streamed {} B, stalls {:.3f} ms",
      pass, measured_s * 1e3, predicted_s * 1e3, lower_bound_s * 1e3, overlap_efficiency * 100,
      sum_compute_s * 1e3, streamed_bytes, total_stall_s() * 1e3);
}

TraceRecorder::TraceRecorder(size_t max_events) : max_events_(max_events) {}

void TraceRecorder::set_enabled(bool on) {
  std::lock_guard l(mu_);
  enabled_ = on;
}
bool TraceRecorder::enabled() const {
  std::lock_guard l(mu_);
  return enabled_;
}
void TraceRecorder::add(const TraceEvent& e) {
  std::lock_guard l(mu_);
  if (!enabled_) return;
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back(e);
}
void TraceRecorder::set_layer_names(std::vector<std::string> names) {
  std::lock_guard l(mu_);
  names_ = std::move(names);
}
std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard l(mu_);
  return events_;
}
size_t TraceRecorder::dropped() const {
  std::lock_guard l(mu_);
  return dropped_;
}
void TraceRecorder::clear() {
  std::lock_guard l(mu_);
  events_.clear();
  dropped_ = 0;
}

std::string TraceRecorder::chrome_json() const {
  std::lock_guard l(mu_);
  nlohmann::json evs = nlohmann::json::array();
  const char* threads[] = {"", "compute", "copy", "disk", "disk reads", "host compute"};
  for (int tid = 1; tid <= 5; ++tid)
    evs.push_back({{"ph", "M"}, {"pid", 1}, {"tid", tid}, {"ts", 0}, {"name", "thread_name"},
                   {"args", {{"name", threads[tid]}}}});
  for (const TraceEvent& e : events_) {
    int tid = 1;
    if (e.kind == TraceKind::kCopy || e.kind == TraceKind::kCopyWait) tid = 2;
    if (e.kind == TraceKind::kDiskRead) tid = 3;
    if (e.kind == TraceKind::kDiskChunk) tid = 4;
    if (e.kind == TraceKind::kHostCompute) tid = 5;
    std::string lname = e.layer >= 0 && static_cast<size_t>(e.layer) < names_.size() && !names_[e.layer].empty()
                            ? names_[e.layer]
                            : fmt::format("layer{}", e.layer);
    evs.push_back({{"ph", "X"},
                   {"pid", 1},
                   {"tid", tid},
                   {"ts", e.start_us},
                   {"dur", std::max(0.0, e.end_us - e.start_us)},
                   {"name", fmt::format("{} {}", trace_kind_name(e.kind), lname)},
                   {"cat", std::string(trace_kind_name(e.kind))},
                   {"args", {{"layer", e.layer}, {"slot", e.slot}, {"pass", e.pass}, {"bytes", e.bytes}}}});
  }
  nlohmann::json doc = {{"traceEvents", std::move(evs)}, {"displayTimeUnit", "ms"}};
  return doc.dump();
}

Status TraceRecorder::write_chrome_json(const std::string& path) const {
  std::string s = chrome_json();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::FromErrno(fmt::format("open trace file {}", path), errno);
  size_t w = std::fwrite(s.data(), 1, s.size(), f);
  int err = errno;
  if (std::fclose(f) != 0 || w != s.size())
    return Status::FromErrno(fmt::format("write trace file {} ({} bytes)", path, s.size()), err);
  return Status::OK();
}

}  // namespace layerstream::sched

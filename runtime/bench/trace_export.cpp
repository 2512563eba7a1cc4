#include "runtime/bench/trace_export.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace layerstream::bench {

std::string bench_chrome_json(const BenchResult& result, const std::vector<std::vector<sched::TraceEvent>>& events) {
  using nlohmann::json;
  json evs = json::array();
  const char* threads[] = {"", "compute", "copy", "disk", "disk reads", "host compute"};
  for (size_t i = 0; i < result.strategies.size(); ++i) {
    const StrategyResult& s = result.strategies[i];
    if (s.skipped) continue;
    const int pid = static_cast<int>(i) + 1;
    evs.push_back({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"ts", 0}, {"name", "process_name"},
                   {"args", {{"name", s.name}}}});
    evs.push_back({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"ts", 0}, {"name", "process_sort_index"},
                   {"args", {{"sort_index", pid}}}});
    for (int tid = 1; tid <= 5; ++tid)
      evs.push_back({{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"ts", 0}, {"name", "thread_name"},
                     {"args", {{"name", threads[tid]}}}});
    if (i >= events.size()) continue;
    for (const sched::TraceEvent& e : events[i]) {
      int tid = 1;
      if (e.kind == sched::TraceKind::kCopy || e.kind == sched::TraceKind::kCopyWait) tid = 2;
      if (e.kind == sched::TraceKind::kDiskRead) tid = 3;
      if (e.kind == sched::TraceKind::kDiskChunk) tid = 4;
      if (e.kind == sched::TraceKind::kHostCompute) tid = 5;
      std::string lname = e.layer >= 0 && static_cast<size_t>(e.layer) < s.layers.size()
                              ? s.layers[e.layer].name
                              : fmt::format("layer{}", e.layer);
      evs.push_back({{"ph", "X"},
                     {"pid", pid},
                     {"tid", tid},
                     {"ts", e.start_us},
                     {"dur", std::max(0.0, e.end_us - e.start_us)},
                     {"name", fmt::format("{} {}", sched::trace_kind_name(e.kind), lname)},
                     {"cat", std::string(sched::trace_kind_name(e.kind))},
                     {"args", {{"layer", e.layer}, {"slot", e.slot}, {"pass", e.pass}, {"bytes", e.bytes}}}});
    }
  }
  json doc = {{"traceEvents", std::move(evs)}, {"displayTimeUnit", "ms"}};
  return doc.dump();
}

Status write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::FromErrno(fmt::format("open {}", tmp), errno);
  size_t w = std::fwrite(text.data(), 1, text.size(), f);
  int err = errno;
  if (std::fclose(f) != 0 || w != text.size()) {
    std::remove(tmp.c_str());
    return Status::FromErrno(fmt::format("write {} ({} bytes)", tmp, text.size()), err);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IOError(fmt::format("rename {} to {}: {}", tmp, path, ec.message()));
  return Status::OK();
}

}  // namespace layerstream::bench

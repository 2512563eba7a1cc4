#include "runtime/bench/bench_result.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "layerstream/units.h"

namespace layerstream::bench {

void finalize(BenchResult& r) {
  const StrategyResult* best = nullptr;
  for (StrategyResult& s : r.strategies) {
    if (s.skipped || s.passes.empty()) continue;
    std::vector<double> ms, stall, bound;
    for (const PassRecord& p : s.passes) {
      ms.push_back(p.pass_s * 1e3);
      stall.push_back(p.stall_s * 1e3);
      bound.push_back(p.lower_bound_s * 1e3);
    }
    s.pass_ms = planning::summarize(ms);
    s.stall_ms = planning::summarize(stall).median;
    s.lower_bound_ms = planning::summarize(bound).median;
    s.streamed_bytes = s.passes.back().streamed_bytes;
    s.predicted_ms = s.passes.back().predicted_s * 1e3;
    s.tokens_per_s = s.pass_ms.median > 0 ? r.workload.tokens_per_pass / (s.pass_ms.median * 1e-3) : 0;
    s.overlap_efficiency = s.pass_ms.median > 0 ? s.lower_bound_ms / s.pass_ms.median : 0;
    uint64_t db = 0;
    double ds = 0;
    s.max_reads_in_flight = 0;
    for (const PassRecord& p : s.passes) {
      db += p.disk_bytes;
      ds += p.disk_s;
      s.max_reads_in_flight = std::max(s.max_reads_in_flight, p.max_reads_in_flight);
    }
    s.disk_gbps = ds > 0 ? db / ds / 1e9 : 0;
    if (!best || s.pass_ms.median < best->pass_ms.median) best = &s;
  }
  r.best = best ? best->name : "";
  const StrategyResult* ref = nullptr;
  for (StrategyResult& s : r.strategies) {
    if (s.skipped || s.passes.empty()) continue;
    s.ratio_to_best = best && best->pass_ms.median > 0 ? s.pass_ms.median / best->pass_ms.median : 0;
    if (s.name == "planned") ref = &s;
  }
  if (!ref) ref = best;
  r.reference = ref ? ref->name : "";
  r.lower_bound_ms = ref ? ref->lower_bound_ms : 0;
  r.predicted_ms = ref ? ref->predicted_ms : 0;
  r.overlap_efficiency = ref ? ref->overlap_efficiency : 0;
  r.disk_gbps = ref ? ref->disk_gbps : 0;
}

// The JSON keys are the field names (docs in bench_result.h).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BoxInfo, backend, device, link_gbps, disk_gbps, sim_link_gbps, link_source,
                                   disk_source)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ModelInfo, file, bytes, weight_bytes, layers, blocks, dtype)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WorkloadInfo, mode, prompt_len, batch, warmup, passes, tokens_per_pass, io)

nlohmann::json to_json(const BenchResult& r) {
  using nlohmann::json;
  json strategies = json::array();
  for (const StrategyResult& s : r.strategies) {
    json j = {{"name", s.name}, {"skipped", s.skipped}};
    if (s.skipped) {
      j["skip_reason"] = s.skip_reason;
      strategies.push_back(std::move(j));
      continue;
    }
    json passes = json::array();
    for (const PassRecord& p : s.passes) {
      passes.push_back({{"pass_ms", p.pass_s * 1e3},
                        {"stall_ms", p.stall_s * 1e3},
                        {"streamed_bytes", p.streamed_bytes},
                        {"predicted_ms", p.predicted_s * 1e3},
                        {"lower_bound_ms", p.lower_bound_s * 1e3},
                        {"compute_ms", p.sum_compute_s * 1e3},
                        {"disk_bytes", p.disk_bytes},
                        {"disk_ms", p.disk_s * 1e3},
                        {"max_reads_in_flight", p.max_reads_in_flight}});
    }
    json layers = json::array();
    for (const LayerTiming& l : s.layers)
      layers.push_back({{"name", l.name}, {"bytes", l.bytes}, {"tier", l.tier}, {"site", l.site},
                        {"compute_ms", l.compute_s * 1e3}, {"transfer_ms", l.transfer_s * 1e3}});
    j.update({{"plan", s.plan},
              {"pass_ms", {{"min", s.pass_ms.min}, {"median", s.pass_ms.median}, {"max", s.pass_ms.max}}},
              {"tokens_per_s", s.tokens_per_s},
              {"stall_ms", s.stall_ms},
              {"streamed_bytes", s.streamed_bytes},
              {"lower_bound_ms", s.lower_bound_ms},
              {"predicted_ms", s.predicted_ms},
              {"overlap_efficiency", s.overlap_efficiency},
              {"ratio_to_best", s.ratio_to_best},
              {"disk_gbps", s.disk_gbps},
              {"max_reads_in_flight", s.max_reads_in_flight},
              {"load_bytes", s.load_bytes},
              {"passes", std::move(passes)},
              {"layers", std::move(layers)}});
    strategies.push_back(std::move(j));
  }
  return {
      {"box", r.box},
      {"model", r.model},
      {"budget", {{"vram_bytes", r.vram_budget}, {"ram_bytes", r.ram_budget}}},
      {"workload", r.workload},
      {"schedule", r.schedule},
      {"schedule_reason", r.schedule_reason},
      {"strategies", std::move(strategies)},
      {"best", r.best},
      {"reference", r.reference},
      {"lower_bound_ms", r.lower_bound_ms},
      {"predicted_ms", r.predicted_ms},
      {"overlap_efficiency", r.overlap_efficiency},
      {"disk_gbps", r.disk_gbps},
  };
}

std::string format_table(const BenchResult& r) {
  std::string out;
  out += fmt::format("box:    {} backend, {}; link {:.2f} GB/s ({}), disk {:.2f} GB/s ({})\n", r.box.backend,
                     r.box.device, r.box.link_gbps, r.box.link_source, r.box.disk_gbps, r.box.disk_source);
  out += fmt::format("model:  {} ({}, {} layers, {}); budget vram {}, ram {}\n", r.model.file,
                     format_bytes(r.model.bytes), r.model.layers, r.model.dtype, format_bytes(r.vram_budget),
                     format_bytes(r.ram_budget));
  out += fmt::format("work:   {} mode, {} tokens per pass; {} warm-up + {} measured passes per strategy, {}",
                     r.workload.mode, r.workload.tokens_per_pass, r.workload.warmup, r.workload.passes, r.schedule);
  if (!r.schedule_reason.empty()) out += " (" + r.schedule_reason + ")";
  out += "\n\n";
  out += fmt::format("{:<9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>10} {:>10} {:>6} {:>7}\n", "strategy",
                     "min ms", "median ms", "max ms", "tokens/s", "stall ms", "streamed", "bound ms", "pred ms",
                     "eff", "vs best");
  for (const StrategyResult& s : r.strategies) {
    if (s.skipped) {
      out += fmt::format("{:<9} skipped: {}\n", s.name, s.skip_reason);
      continue;
    }
    out += fmt::format("{:<9} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.1f} {:>10.2f} {:>11} {:>10.2f} {:>10.2f} {:>5.0f}% {:>6.2f}x\n",
                       s.name, s.pass_ms.min, s.pass_ms.median, s.pass_ms.max, s.tokens_per_s, s.stall_ms,
                       format_bytes(s.streamed_bytes), s.lower_bound_ms, s.predicted_ms,
                       s.overlap_efficiency * 100, s.ratio_to_best);
  }
  out += "\n";
  for (const StrategyResult& s : r.strategies)
    if (!s.skipped && !s.plan.empty()) out += fmt::format("plan {:<8} {}\n", s.name + ":", s.plan);
  for (const StrategyResult& s : r.strategies)
    if (!s.skipped && (s.disk_gbps > 0 || s.load_bytes > 0))
      out += fmt::format("io   {:<8} disk {:.3f} GB/s, up to {} reads in flight; loaded {} into residents/RAM\n",
                         s.name + ":", s.disk_gbps, s.max_reads_in_flight, format_bytes(s.load_bytes));
  if (!r.reference.empty())
    out += fmt::format("\n{}: lower bound {:.2f} ms, predicted {:.2f} ms, overlap efficiency {:.0f}% (bound / median); best: {}\n",
                       r.reference, r.lower_bound_ms, r.predicted_ms, r.overlap_efficiency * 100, r.best);
  return out;
}

}  // namespace layerstream::bench

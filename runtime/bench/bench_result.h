// The result of `layerstream bench`: what ran (box, model, budget, workload),
// each strategy's measured passes and their summary, and the figures that
// compare them. Filled by the session (session.h), summarised by finalize(),
// written as JSON, a text table, a Chrome trace and an HTML report.
//
// Units: times in milliseconds in the summaries (suffix _ms), seconds in the
// raw pass records (suffix _s), bytes, GB/s (1e9 bytes per second).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/planning/stats.h"
#include "runtime/scheduler/trace.h"

namespace layerstream::bench {

// One measured pass of one strategy.
struct PassRecord {
  double pass_s = 0;          // measured by device events, first compute start to last compute end
  double stall_s = 0;         // compute waiting for loads, summed over layers
  uint64_t streamed_bytes = 0;
  double predicted_s = 0;     // the simulator's prediction for the plan in force
  double lower_bound_s = 0;   // max(sum compute, streamed bytes / link, disk bytes / disk)
  double sum_compute_s = 0;
  uint64_t disk_bytes = 0;    // read from disk for the pass's layers
  double disk_s = 0;          // time the disk was busy with those reads
  int max_reads_in_flight = 0;
};

// One layer in the report's per-layer bars (one pass).
struct LayerTiming {
  std::string name;
  uint64_t bytes = 0;
  std::string tier;           // "resident", "ram", "disk"
  std::string site = "device";  // "device", "host", "split" (hybrid execution)
  double compute_s = 0;
  double transfer_s = 0;      // copy (or direct disk read) time of the layer; 0 when resident
};

struct StrategyResult {
  std::string name;                   // "resident", "serial", "overlap", "planned"
  bool skipped = false;
  std::string skip_reason;
  std::string plan;                   // describe_plan() of the plan in force at the end
  std::vector<PassRecord> passes;     // measured passes (warm-up excluded)
  // One measured pass's trace events (the median pass), times in us relative
  // to that pass's first event; for the timeline.
  std::vector<sched::TraceEvent> timeline;
  std::vector<LayerTiming> layers;    // same pass

  // Filled by finalize():
  planning::MinMedMax pass_ms;
  double tokens_per_s = 0;            // tokens per pass / median pass time
  double stall_ms = 0;                // median over passes
  uint64_t streamed_bytes = 0;        // per pass (last pass)
  double lower_bound_ms = 0;          // median over passes
  double predicted_ms = 0;            // last pass
  double overlap_efficiency = 0;      // lower_bound_ms / median pass
  double ratio_to_best = 0;           // median / best strategy's median (1 for the best)
  double disk_gbps = 0;               // measured: disk bytes / disk busy time over the passes (0: no disk)
  int max_reads_in_flight = 0;        // most disk reads outstanding at once over the passes
  uint64_t load_bytes = 0;            // bytes loaded into residents and the RAM tier (start-up + re-plans)
};

struct BoxInfo {
  std::string backend;                // "host", "cuda"
  std::string device;                 // DeviceInfo::name
  double link_gbps = 0;               // H2D bandwidth the planner used
  double disk_gbps = 0;               // disk bandwidth the planner used (0: nothing on disk)
  double sim_link_gbps = 0;           // host backend throttle (0: off)
  std::string link_source;            // "measured", "box file <path>", "--sim-link"
  std::string disk_source;
};

struct ModelInfo {
  std::string file;
  uint64_t bytes = 0;                 // file size
  uint64_t weight_bytes = 0;          // bytes the layers span (what would stream)
  int layers = 0;                     // scheduler layers (embedding + blocks + head)
  int blocks = 0;
  std::string dtype;
};

struct WorkloadInfo {
  std::string mode;                   // "decode" or "prefill"
  int prompt_len = 0;
  int batch = 1;
  int warmup = 0;
  int passes = 0;
  int tokens_per_pass = 0;            // decode: batch; prefill: prompt_len * batch
  std::string io;                     // io path name
};

struct BenchResult {
  BoxInfo box;
  ModelInfo model;
  uint64_t vram_budget = 0;
  uint64_t ram_budget = 0;
  WorkloadInfo workload;
  std::string schedule;               // "interleaved" or "blocks"
  std::string schedule_reason;
  std::vector<StrategyResult> strategies;

  // Filled by finalize():
  std::string best;                   // strategy with the lowest median pass time
  std::string reference;              // strategy the top-level figures describe ("planned" when it ran)
  double lower_bound_ms = 0;
  double predicted_ms = 0;
  double overlap_efficiency = 0;
  double disk_gbps = 0;               // the reference strategy's measured disk rate
};

// Computes every "filled by finalize()" field from the pass records.
void finalize(BenchResult& result);

// The JSON document `bench --json` writes (see docs in the command's help):
// box, model, budget, workload, schedule, strategies[], best, reference,
// lower_bound_ms, predicted_ms, overlap_efficiency.
nlohmann::json to_json(const BenchResult& result);

// The table `bench` prints: one row per strategy, then the reference figures.
std::string format_table(const BenchResult& result);

}  // namespace layerstream::bench

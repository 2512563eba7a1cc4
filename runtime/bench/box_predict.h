// What a workload's passes would take on a box, per strategy, without running
// it: the runner's footprint (from a model file or a shape, model_shape.h), a
// cost model made of a box profile's figures (box_profile.h), and the planner
// and simulator asked as the executor asks them for each strategy (the
// planner input of runner_executor_view.h, the executor's own). Used by
// `bench --box` for a profile of another box (nothing runs) and, next to the
// measured figures, for a profile of this one.
//
// The cost model: each layer's device compute from the profile's device
// rates, its host compute from the host rates (none when the profile has no
// host figures: the host site is never chosen), one activation crossing =
// tokens x hidden x 4 bytes over the link (+10 us on a GPU), link and disk
// from the profile. Matmuls only: norms, RoPE and attention are left out (a
// few percent of a pass at short contexts).
// Thread safety: plain functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/planning/box_profile.h"
#include "runtime/bench/llama_bench.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/model/gguf_file.h"
#include "runtime/scheduler/plan.h"

namespace layerstream::bench {

struct PredictOptions {
  llama::RunnerOptions runner;  // budgets, context, KV type, overlap slots, host_compute_factor (strategy: per entry)
  LlamaWorkload work;
  std::vector<std::string> strategies;  // resident, serial, overlap, planned, host
  double link_gbps = 0;  // > 0: instead of the profile's (--sim-link on the host backend)
};

struct StrategyPrediction {
  std::string name;
  std::string error;  // non-empty: the strategy does not run at these budgets (why)
  sched::Plan plan;   // tiers, sites, slots, predicted pass and bound
  double pass_s = 0, lower_bound_s = 0, tokens_per_s = 0;
  int resident = 0, streamed = 0, host = 0, split = 0;  // layers per site (resident/streamed: on the device)
  std::string sites;  // per layer: R resident, S streamed, H host, X split by rows (sched::site_map)
};

struct BoxPrediction {
  std::string box_source, box_backend, box_device;
  double link_gbps = 0, disk_gbps = 0, ram_read_gbps = 0;
  int host_threads = 0;
  bool host_figures = false;
  // Sum of the blocks' host compute over their device compute for this pass
  // size (0: no host figures): what `bench` starts its runners' host factor
  // at when none is given.
  double host_factor = 0;
  std::string model;  // file or shape
  int layers = 0;
  uint64_t weight_bytes = 0, reserve_bytes = 0, vram_budget = 0, ram_budget = 0;
  std::string mode;  // "decode" / "prefill"
  int tokens_per_pass = 0;
  std::vector<std::string> layer_names;
  std::vector<uint64_t> layer_bytes;
  std::vector<StrategyPrediction> strategies;
};

// Errors: InvalidArgument for an unknown strategy or workload; the footprint's
// (the model's) errors. A strategy that does not fit is not an error: its
// entry says why.
Result<BoxPrediction> predict_with_box(const planning::BoxFigures& box, const GgufFile& file, const PredictOptions& options);

// The table: per strategy predicted pass, tokens/s, bound, sites; with
// `measured_s` (strategy -> measured median pass seconds) also those and
// predicted / measured.
std::string format_prediction(const BoxPrediction& p, const std::map<std::string, double>& measured_s = {});
nlohmann::json to_json(const BoxPrediction& p, const std::map<std::string, double>& measured_s = {});

}  // namespace layerstream::bench

// The expert-level rows of Model::plan (memory_plan.h: ExpertBudgetPlan) for
// a mixture of experts: each MoE layer's costs (sched::ExpertLayerCost; the
// rule is expert_plan.h's) made from the plan's cost model and matmul rates,
// the resident experts chosen per budget for decode, the same placement's
// prefill, and llama.cpp's --n-cpu-moe equivalent at the same budget.
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <functional>

#include "layerstream/memory_plan.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/scheduler/cost_model.h"

namespace layerstream::planning {

// Seconds of one matmul for `tokens` tokens on one site.
using MatmulSeconds = std::function<double(const llama::RunnerFootprint::Matmul&, int tokens)>;

struct ExpertRowInputs {
  const llama::RunnerFootprint* footprint = nullptr;
  // Device compute per layer and class (an MoE layer's counts the `used`
  // experts one token runs, as the footprint's matmuls do) and the link rate.
  const sched::CostModel* cost = nullptr;
  MatmulSeconds device;           // the matmul rates the cost model's compute came from
  MatmulSeconds host;             // empty: no host site (no host figures)
  double crossing_latency_s = 0;  // per activation crossing (a GPU's launch and sync)
  int decode_cls = 0, prefill_cls = 0;
  bool prefill_rates = false;     // false: no prefill prediction (0)
};

// Seconds of the experts a pass of `tokens` tokens runs through one layer
// on a site, as expert_plan.h counts them: the expected distinct experts hit,
// each with the tokens a hit carries (0 for a dense layer).
double expected_experts_seconds(const llama::RunnerFootprint::Experts& experts, int tokens, const MatmulSeconds& site);
// Seconds of layer `layer`'s matmuls for a pass of `tokens` tokens: its dense
// matmuls, and its experts as above (not `used` experts shared by every token).
double layer_matmul_seconds(const llama::RunnerFootprint& fp, size_t layer, int tokens, const MatmulSeconds& site);

// The model's expert sizes into `plan` (MemoryPlan::experts ...); false, and
// nothing set, for a dense model.
bool describe_experts(MemoryPlan& plan, const llama::RunnerFootprint& fp);

// The expert-level row at a device budget of `budget` bytes.
ExpertBudgetPlan plan_expert_budget(const ExpertRowInputs& in, uint64_t budget);

}  // namespace layerstream::planning

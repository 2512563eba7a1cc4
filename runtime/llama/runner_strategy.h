// What each runner Strategy means to the scheduler, in one place: the
// executor's options (executor_options_for, declared in llama_runner.h), the
// site policy, whether blocks may compute on the host, and the minimum VRAM
// budget the strategy's placement needs. The planner input and the
// direct-read rule are the scheduler's (runtime/scheduler/planner_input.h).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/scheduler/executor.h"
#include "runtime/scheduler/planner.h"
#include "runtime/scheduler/planner_input.h"

namespace layerstream::llama {

// A strategy's placement, as the scheduler sees it. Every other question
// about a strategy is answered from this.
struct StrategyPlacement {
  bool all_resident = false;  // every layer pinned resident
  bool serial = false;        // one slot, load then compute
  bool first_fit = false;     // the fixed first-fit plan (overlap_slots slots)
  bool auto_replan = true;    // the planner re-plans after warm-up and on drift
  sched::HostPolicy host_policy = sched::HostPolicy::kNever;
  double host_compute_factor = 0;  // ExecutorOptions::host_compute_factor (0: predicted)
};
StrategyPlacement strategy_placement(const RunnerOptions& o);

// The executor's site policy for these options.
inline sched::HostPolicy host_policy_for(const RunnerOptions& o) { return strategy_placement(o).host_policy; }

// Blocks may compute on the host site (the head stays on the device): the
// scheduler's rule (sched::may_use_host_site) for the executor these options make.
bool blocks_host_ok(const RunnerOptions& o);

// The smallest VRAM budget at which the executor finds a placement for
// `layers` next to a reserve of `reserve_bytes` under the strategy (asked of
// the scheduler: all resident, the serial or first-fit baseline, or the
// planner).
uint64_t min_vram_for(const std::vector<sched::LayerSpec>& layers, uint64_t reserve_bytes, const RunnerOptions& o,
                      bool disk_direct);

}  // namespace layerstream::llama

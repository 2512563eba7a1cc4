// What each runner Strategy means to the scheduler, in one place: the
// executor's options (executor_options_for, declared in llama_runner.h), the
// site policy, whether blocks may compute on the host, and the minimum VRAM
// budget the strategy's placement needs. Also the runner's two inputs that
// belong to the scheduler's rules (the planner input of the fixed kOverlap
// plan and the direct-read rule), each in one small function so that a
// shared scheduler rule can replace it.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/scheduler/executor.h"
#include "runtime/scheduler/planner.h"

namespace layerstream::llama {

// A strategy's placement, as the scheduler sees it. Every other question
// about a strategy is answered from this.
struct StrategyPlacement {
  bool all_resident = false;  // every layer pinned resident
  bool serial = false;        // one slot, load then compute
  bool first_fit = false;     // the fixed first-fit plan (overlap_slots slots)
  bool auto_replan = true;    // the planner re-plans after warm-up and on drift
  sched::HostPolicy host_policy = sched::HostPolicy::kNever;
  double host_compute_factor = 0;  // ExecutorOptions::host_compute_factor
};
StrategyPlacement strategy_placement(const RunnerOptions& o);

// The executor's site policy for these options.
inline sched::HostPolicy host_policy_for(const RunnerOptions& o) { return strategy_placement(o).host_policy; }

// Blocks may compute on the host site (the head stays on the device): under
// a host policy, or a given plan with host or split sites.
bool blocks_host_ok(const RunnerOptions& o);

// Disk reads land straight in device memory (no staging ring): the device is
// host-addressable and staging is not forced. The runner's copy of the
// scheduler's rule; footprint() knows only the backend (the host backend is
// host-addressable).
inline bool disk_reads_direct(const DeviceInfo& info, bool force_staging) {
  return info.host_addressable && !force_staging;
}
inline bool disk_reads_direct(BackendKind backend) { return backend == BackendKind::kHost; }

// The planner input of kOverlap's fixed first-fit plan: the layers, the
// budget beside the reserve, the RAM budget with the staging ring counted
// against it. `cost` must outlive the input.
sched::PlannerInput overlap_planner_input(const std::vector<sched::LayerSpec>& layers,
                                          const sched::ExecutorOptions& e, const DeviceInfo& info,
                                          uint64_t reserved_bytes, const sched::CostModel& cost);

// The smallest VRAM budget at which the executor finds a placement for
// `layers` next to a reserve of `reserve_bytes` under the strategy (asked of
// the scheduler: all resident, the serial or first-fit baseline, or the
// planner).
uint64_t min_vram_for(const std::vector<sched::LayerSpec>& layers, uint64_t reserve_bytes, const RunnerOptions& o,
                      bool disk_direct);

}  // namespace layerstream::llama

#include "runtime/llama/runner_strategy.h"

#include <algorithm>
#include <string>
#include <utility>

#include "layerstream/units.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/min_budget.h"

namespace layerstream::llama {

StrategyPlacement strategy_placement(const RunnerOptions& o) {
  StrategyPlacement p;
  switch (o.strategy) {
    case Strategy::kResident:
      p.all_resident = true;
      p.auto_replan = false;
      break;
    case Strategy::kSerial:
      p.serial = true;
      p.auto_replan = false;
      break;
    case Strategy::kOverlap:
      p.first_fit = true;
      p.auto_replan = false;
      break;
    case Strategy::kPlanned:
      // Sites chosen from costs whatever the options: host costs as measured,
      // predicted before that (sched::host_factor_before_measurement), or
      // overridden by host_compute_factor.
      p.host_compute_factor = o.host_compute_factor;
      p.host_policy = sched::HostPolicy::kChoose;
      break;
    case Strategy::kHost:
      p.host_compute_factor = std::max(1.0, o.host_compute_factor);
      p.host_policy = sched::HostPolicy::kAll;
      break;
  }
  return p;
}

bool blocks_host_ok(const RunnerOptions& o) {
  sched::ExecutorOptions e;
  e.host_policy = host_policy_for(o);
  if (o.strategy == Strategy::kPlanned && o.plan) e.plan = *o.plan;
  return sched::may_use_host_site(e);
}

Result<sched::ExecutorOptions> executor_options_for(const RunnerOptions& o, const std::vector<sched::LayerSpec>& layers,
                                                    const DeviceInfo& info, uint64_t reserved_bytes) {
  sched::ExecutorOptions e;
  e.vram_budget = o.vram_budget;
  e.ram_budget = o.ram_budget;
  e.reserved_vram = reserved_bytes;
  e.link_gbps = o.link_gbps;
  e.disk_gbps = o.disk_gbps;
  e.reader = o.reader;
  e.trace = o.trace;
  e.load_progress = o.load_progress;
  if (o.staging_buffer_bytes) e.staging_buffer_bytes = o.staging_buffer_bytes;
  if (o.staging_buffers) e.staging_buffers = o.staging_buffers;
  const StrategyPlacement p = strategy_placement(o);
  e.serial = p.serial;
  e.auto_replan = p.auto_replan;
  e.host_policy = p.host_policy;
  e.host_compute_factor = p.host_compute_factor;
  if (o.strategy == Strategy::kPlanned && o.plan) e.plan = *o.plan;
  if (p.first_fit) {
    if (o.overlap_slots < 1)
      return Status::InvalidArgument("overlap_slots must be >= 1, got " + std::to_string(o.overlap_slots));
    if (reserved_bytes > o.vram_budget)
      return Status::OutOfBudget("vram budget " + format_bytes(o.vram_budget) +
                                 " cannot hold the KV cache and activations (" + format_bytes(reserved_bytes) + ")");
    const sched::CostModel cost(static_cast<int>(layers.size()));
    const sched::PlannerInput in =
        sched::executor_planner_input(layers, e, sched::disk_reads_direct(info, e.force_staging), cost, 0);
    LS_ASSIGN_OR_RETURN(sched::Plan plan, sched::plan_first_fit(in, o.overlap_slots));
    e.plan = std::move(plan);
  }
  return e;
}

uint64_t min_vram_for(const std::vector<sched::LayerSpec>& layers, uint64_t reserve_bytes, const RunnerOptions& o,
                      bool disk_direct) {
  const StrategyPlacement p = strategy_placement(o);
  sched::MinBudgetQuery q;
  q.host_policy = p.host_policy;
  q.reserve_bytes = reserve_bytes;
  q.ram_budget = o.ram_budget;
  q.disk_direct = disk_direct;
  q.all_resident = p.all_resident;
  q.serial = p.serial;
  q.first_fit = p.first_fit;
  q.first_fit_slots = o.overlap_slots;
  return sched::min_vram_budget(layers, q);
}

}  // namespace layerstream::llama

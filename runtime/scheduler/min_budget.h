// The smallest VRAM budget at which the executor finds a placement for a list
// of layers, asked of the planner by the scheduler so that callers (the Llama
// runner, `layerstream plan`) never build planner inputs themselves.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/scheduler/layer.h"
#include "runtime/scheduler/executor_options.h"
#include "runtime/scheduler/planner.h"
#include "runtime/scheduler/planner_input.h"

namespace layerstream::sched {

// Which placement the budget must allow.
struct MinBudgetQuery {
  uint64_t reserve_bytes = 0;  // the caller's reserve (KV cache, activations), next to the layers
  uint64_t ram_budget = 0;     // pinned RAM for the RAM tier
  bool disk_direct = false;    // disk reads land in the window (host-addressable device)
  bool all_resident = false;   // every layer resident: no planner asked
  bool serial = false;         // the serial baseline (one slot, no prefetch)
  bool first_fit = false;      // the first-fit baseline with first_fit_slots slots, else the planner
  int first_fit_slots = 0;
  // The planner's site policy (ExecutorOptions::host_policy). Under kAll and
  // kChoose the layers marked LayerSpec::host_ok may compute on the host
  // site and need no VRAM: the minimum is what the other layers need (for
  // `host`, usually the head resident, and no window when nothing streams).
  HostPolicy host_policy = HostPolicy::kNever;
};

// The least budget (bytes, reserve included, reserve rounded to the slot
// alignment) the query's placement accepts: reserve + all layers for
// all_resident, else found by bisection between reserve + the largest slot of
// a layer that must compute on the device (device_span_floor) and the budget
// that fits. Feasibility depends on sizes only, so a cost model
// without measurements serves. Each budget tried is planned from the
// executor's own planner input (executor_planner_input) for the options below.
uint64_t min_vram_budget(const std::vector<LayerSpec>& layers, const MinBudgetQuery& query);

// The executor options the search plans each budget with: the query's
// budgets, reserve, serial baseline and site policy, the executor's defaults
// for the rest (slots, chunks, staging).
ExecutorOptions min_budget_executor_options(const MinBudgetQuery& query, uint64_t vram_budget);

// The largest slot span among the layers that must compute on the device
// under `policy` (all of them under kNever; those not host_ok otherwise):
// no placement runs in less VRAM than this next to the reserve. 0 when none.
uint64_t device_span_floor(const std::vector<LayerSpec>& layers, HostPolicy policy);

}  // namespace layerstream::sched

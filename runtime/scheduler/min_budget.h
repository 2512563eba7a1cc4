// The smallest VRAM budget at which the executor finds a placement for a list
// of layers, asked of the planner by the scheduler so that callers (the Llama
// runner, `layerstream plan`) never build planner inputs themselves.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/scheduler/layer.h"
#include "runtime/scheduler/planner.h"

namespace layerstream::sched {

// The planner's view of `layers`: bytes, slot spans, file-backed and pins.
// Budgets, costs and options are left at their defaults for the caller.
PlannerInput layer_planner_input(const std::vector<LayerSpec>& layers);

// Which placement the budget must allow.
struct MinBudgetQuery {
  uint64_t reserve_bytes = 0;  // the caller's reserve (KV cache, activations), next to the layers
  uint64_t ram_budget = 0;     // pinned RAM for the RAM tier
  bool disk_direct = false;    // disk reads land in the window (host-addressable device)
  bool all_resident = false;   // every layer resident: no planner asked
  bool serial = false;         // the serial baseline (one slot, no prefetch)
  bool first_fit = false;      // the first-fit baseline with first_fit_slots slots, else the planner
  int first_fit_slots = 0;
};

// The least budget (bytes, reserve included, reserve rounded to the slot
// alignment) the query's placement accepts: reserve + all layers for
// all_resident, else found by bisection between reserve + the largest slot and
// the budget that fits. Feasibility depends on sizes only, so a cost model
// without measurements serves, with the executor's default slots; the staging
// ring is outside the RAM budget, as in the executor's own planner input.
uint64_t min_vram_budget(const std::vector<LayerSpec>& layers, const MinBudgetQuery& query);

}  // namespace layerstream::sched

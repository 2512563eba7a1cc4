#include "runtime/scheduler/min_budget.h"

#include <algorithm>

#include "runtime/scheduler/executor.h"

namespace layerstream::sched {

PlannerInput layer_planner_input(const std::vector<LayerSpec>& layers) {
  PlannerInput in;
  for (const LayerSpec& l : layers) {
    in.bytes.push_back(l.bytes);
    in.spans.push_back(slot_span(l));
    in.from_file.push_back(l.from_file());
    in.pins.push_back(l.pin);
  }
  return in;
}

uint64_t min_vram_budget(const std::vector<LayerSpec>& layers, const MinBudgetQuery& q) {
  const uint64_t reserve = round_up(q.reserve_bytes, kSlotAlignment);
  uint64_t largest = 0, all = 0;
  for (const LayerSpec& l : layers) {
    largest = std::max(largest, slot_span(l));
    all += round_up(l.bytes, kSlotAlignment);
  }
  if (q.all_resident) return reserve + all;
  const ExecutorOptions defaults;
  CostModel cost(static_cast<int>(layers.size()));
  PlannerInput in = layer_planner_input(layers);
  in.ram_budget = q.ram_budget;
  // As Executor::planner_input: the staging ring is its own allocation, outside ram_budget.
  in.staging_bytes = 0;
  in.cost = &cost;
  in.disk_direct = q.disk_direct;
  in.chunk_bytes = defaults.copy_chunk_bytes;
  in.max_slots = defaults.max_slots;
  in.serial = q.serial;
  auto fits = [&](uint64_t budget) {
    in.vram_budget = budget - reserve;
    if (q.first_fit) return plan_first_fit(in, q.first_fit_slots).ok();
    return make_plan(in).ok();
  };
  uint64_t lo = reserve + largest, hi = std::max(reserve + all, lo);
  if (fits(lo)) return lo;
  while (!fits(hi) && hi < (uint64_t{1} << 50)) hi *= 2;  // pins or RAM limits: look further
  // Bisection keeping fits(hi), !fits(lo).
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace layerstream::sched

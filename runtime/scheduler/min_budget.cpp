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
    in.host_ok.push_back(l.host_ok);
    uint64_t sb = 0;
    for (const SplitTensor& t : l.split_tensors) sb += t.bytes;
    in.split_bytes.push_back(l.host_ok ? sb : 0);
  }
  return in;
}

uint64_t device_span_floor(const std::vector<LayerSpec>& layers, HostPolicy policy) {
  uint64_t m = 0;
  for (const LayerSpec& l : layers)
    if (policy == HostPolicy::kNever || !l.host_ok) m = std::max(m, slot_span(l));
  return m;
}

uint64_t min_vram_budget(const std::vector<LayerSpec>& layers, const MinBudgetQuery& q) {
  const uint64_t reserve = round_up(q.reserve_bytes, kSlotAlignment);
  uint64_t all = 0;
  for (const LayerSpec& l : layers) all += round_up(l.bytes, kSlotAlignment);
  const uint64_t largest = device_span_floor(layers, q.host_policy);
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
  in.host_policy = q.host_policy;
  // A host site needs a known host cost; its value does not change what fits.
  if (q.host_policy != HostPolicy::kNever) cost.set_host_factor(1.0);
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

#include "runtime/scheduler/min_budget.h"

#include <algorithm>

#include "runtime/scheduler/planner_input.h"

namespace layerstream::sched {

uint64_t device_span_floor(const std::vector<LayerSpec>& layers, HostPolicy policy) {
  uint64_t m = 0;
  for (const LayerSpec& l : layers)
    if (policy == HostPolicy::kNever || !l.host_ok) m = std::max(m, slot_span(l));
  return m;
}

ExecutorOptions min_budget_executor_options(const MinBudgetQuery& q, uint64_t vram_budget) {
  ExecutorOptions o;  // the executor's defaults for slots, chunks and staging
  o.vram_budget = vram_budget;
  o.reserved_vram = q.reserve_bytes;
  o.ram_budget = q.ram_budget;
  o.serial = q.serial;
  o.host_policy = q.host_policy;
  return o;
}

uint64_t min_vram_budget(const std::vector<LayerSpec>& layers, const MinBudgetQuery& q) {
  const uint64_t reserve = round_up(q.reserve_bytes, kSlotAlignment);
  uint64_t all = 0;
  for (const LayerSpec& l : layers) all += round_up(l.bytes, kSlotAlignment);
  const uint64_t largest = device_span_floor(layers, q.host_policy);
  if (q.all_resident) return reserve + all;
  CostModel cost(static_cast<int>(layers.size()));
  // A host site needs a known host cost; its value does not change what fits.
  if (q.host_policy != HostPolicy::kNever) cost.set_host_factor(1.0);
  auto fits = [&](uint64_t budget) {
    const PlannerInput in = executor_planner_input(layers, min_budget_executor_options(q, budget), q.disk_direct, cost, 0);
    if (q.first_fit) return plan_first_fit(in, q.first_fit_slots).ok();
    return make_plan(in).ok();
  };
  // At least one byte: a device arena refuses a budget of 0 (a plan with
  // every block on the host and nothing reserved needs no device bytes).
  uint64_t lo = std::max<uint64_t>(1, reserve + largest), hi = std::max(reserve + all, lo);
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

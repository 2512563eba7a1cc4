// Planner: chooses each layer's tier, the number of window slots and the
// prefetch depth that minimise the simulator's predicted pass time within
// the VRAM and pinned-RAM budgets.
//
// Search: for each slot count, start from "stream everything not pinned"
// (RAM tier while the RAM budget lasts, then disk), then greedily make
// resident the layer whose residency cuts predicted pass time most per byte
// (ties go to the layer farthest from other residents, so resident compute
// spreads out and hides later transfers) while it fits; residents shrink the
// slot size when the largest streamed layer leaves the window. The best slot
// count wins (fewer slots on a tie), which trades slots for residents.
// Also: two baselines used by benchmarks and tests.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "layerstream/status.h"
#include "runtime/scheduler/cost_model.h"
#include "runtime/scheduler/plan.h"
#include "runtime/scheduler/simulator.h"

namespace layerstream::sched {

// Which layers may compute on the host site (hybrid execution).
//   kNever:  every layer on the device (today's behaviour).
//   kAll:    every non-resident layer that can (LayerSpec::host_ok, a known
//            host cost) on the host; the residency search runs as usual.
//   kChoose: per layer the site with the better predicted pass time: the
//            best device-only and all-host plans, each refined by greedy
//            single-layer site changes (device, host, or split by rows at
//            the fraction that makes both halves finish together:
//            balanced_split), the best of them wins.
enum class HostPolicy : uint8_t { kNever, kAll, kChoose };

struct PlannerInput {
  std::vector<uint64_t> bytes;               // per layer
  std::vector<uint64_t> spans;               // per layer: slot bytes (slot_span)
  std::vector<bool> from_file;               // per layer: may live on disk
  std::vector<std::optional<Tier>> pins;     // per layer: user's forced tier
  uint64_t vram_budget = 0;   // for residents + slots (the caller's reserve already taken out)
  // Pinned RAM for RAM-tier layers. The staging buffers of disk reads are
  // their own allocation, outside it (executor_planner_input, planner_input.h).
  uint64_t ram_budget = 0;
  const CostModel* cost = nullptr;
  int batch_class = 0;
  bool disk_direct = false;   // disk reads go straight into slots (host-addressable device)
  uint64_t chunk_bytes = 1 << 20;  // staging chunk (simulator tail)
  int max_slots = 8;
  int fixed_slots = 0;        // > 0: use exactly this many slots
  int fixed_depth = -1;       // >= 0: use this prefetch depth (clamped to slots - 1)
  bool serial = false;        // baseline: one slot, no prefetch
  std::vector<bool> host_ok;  // per layer (or empty = none): may run on the host site
  // Per layer (or empty = none): bytes of its row-splittable matmul weights
  // (LayerSpec::split_tensors); > 0 and host_ok: it may split (kChoose).
  std::vector<uint64_t> split_bytes;
  HostPolicy host_policy = HostPolicy::kNever;
};

// The planner's best plan. Errors: InvalidArgument for pins that contradict
// the sources (disk pin without a file); OutOfBudget naming bytes needed and
// available when the pins, or one window, do not fit.
Result<Plan> make_plan(const PlannerInput& in);

// Fills slot_bytes, vram/ram bytes, predicted pass time and bound of `plan`.
SimResult evaluate_plan(const PlannerInput& in, Plan& plan);

// The device fraction of a split of layer i that makes its device half
// (the copy of its device bytes, or its device compute, whichever is longer)
// and its host half finish together, from the cost model; in (0, 1), or 0
// when the layer cannot split or a cost is unknown.
double balanced_split(const PlannerInput& in, int layer);

// Baseline: keep the first layers (in order) resident while they fit next to
// `slots` slots; stream the rest.
Result<Plan> plan_first_fit(const PlannerInput& in, int slots);
// Baseline: an LRU cache of layers over the whole VRAM budget. For a cyclic
// scan larger than the cache LRU never hits, so this is: no residents, as
// many slots as fit, demand loading one layer ahead (depth 1).
Result<Plan> plan_lru(const PlannerInput& in);

}  // namespace layerstream::sched

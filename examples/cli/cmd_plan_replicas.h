// `layerstream plan --replicas N --vram V [--ram R]`: N replicas of one
// model on one box (behind a gateway, examples/serve-replicas/), each with an
// equal share of the budgets. The plan is made for one replica's share; this
// part divides the budgets, refuses a share below one replica's minimum
// (naming how many replicas do fit), and reports the per-replica and the
// aggregate predicted tokens/s.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "layerstream/memory_plan.h"
#include "layerstream/status.h"

namespace layerstream::cli {

struct ReplicaSplit {
  int replicas = 0;  // 0: no --replicas
  uint64_t vram_total = 0, ram_total = 0;
  uint64_t vram_each() const { return vram_total / static_cast<uint64_t>(replicas); }
  uint64_t ram_each() const { return ram_total / static_cast<uint64_t>(replicas); }
};

// Checks the flags (a count >= 1 and a total --vram) and makes `po` plan one
// replica's share of the budgets.
Status apply_replica_share(const ReplicaSplit& split, PlanOptions& po);

// OK when one replica's share runs; else OutOfBudget naming the share, the
// minimum and how many replicas the total holds.
Status check_replica_share_fits(const ReplicaSplit& split, const MemoryPlan& plan);

// The replicas' lines after the plan of one share (which must fit).
void print_replicas(const ReplicaSplit& split, const MemoryPlan& plan);
nlohmann::json replicas_json(const ReplicaSplit& split, const MemoryPlan& plan);

}  // namespace layerstream::cli

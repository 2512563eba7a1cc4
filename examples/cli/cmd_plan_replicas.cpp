#include "examples/cli/cmd_plan_replicas.h"

#include <cstdio>
#include <string>

#include "layerstream/units.h"

namespace layerstream::cli {
namespace {

std::string bytes_text(uint64_t bytes) { return format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)"; }

std::string replicas_text(uint64_t n) { return std::to_string(n) + (n == 1 ? " replica" : " replicas"); }

// Layers each replica copies to the device for every pass (from RAM or disk).
int streamed_layers(const BudgetPlan& b) { return b.layers_ram + b.layers_disk; }

}  // namespace

Status apply_replica_share(const ReplicaSplit& split, PlanOptions& po) {
  if (split.replicas < 1) return Status::InvalidArgument("--replicas must be >= 1");
  if (split.vram_total == 0)
    return Status::InvalidArgument("--replicas needs --vram: the box's total device budget, which the replicas share");
  if (split.vram_each() == 0)
    return Status::InvalidArgument("--vram " + bytes_text(split.vram_total) + " split " +
                                   std::to_string(split.replicas) + " ways leaves 0 bytes per replica");
  po.vram_budget = split.vram_each();
  po.ram_budget = split.ram_each();
  return Status::OK();
}

Status check_replica_share_fits(const ReplicaSplit& split, const MemoryPlan& plan) {
  if (plan.budgets.front().fits) return Status::OK();
  const uint64_t fit = split.vram_total / plan.min_vram_bytes;
  const std::string what_fits = fit == 0 ? "not even one replica fits: one needs " + bytes_text(plan.min_vram_bytes)
                                         : "at most " + replicas_text(fit) + " of the minimum fit in it";
  return Status::OutOfBudget(
      replicas_text(split.replicas) + " sharing --vram " + bytes_text(split.vram_total) + ": each replica's share " +
      bytes_text(split.vram_each()) + " is below one replica's minimum " + bytes_text(plan.min_vram_bytes) +
      " (context " + std::to_string(plan.context) + " x " + std::to_string(plan.sequences) + " sequences, " +
      std::string(name_of(plan.kv_type)) + " KV); " + what_fits);
}

void print_replicas(const ReplicaSplit& split, const MemoryPlan& plan) {
  const BudgetPlan& b = plan.budgets.front();
  const int n = split.replicas;
  std::printf("\n%s, each with --vram %s --ram %s (needs %s of device memory and %s of pinned RAM in all)\n",
              replicas_text(n).c_str(), format_bytes(split.vram_each()).c_str(),
              format_bytes(split.ram_each()).c_str(), format_bytes(split.vram_each() * n).c_str(),
              format_bytes(split.ram_each() * n).c_str());
  std::printf("  one replica alone:  %.2f decode tokens/s at batch %d\n", b.predicted_decode_tokens_per_s,
              plan.sequences);
  std::printf("  aggregate (%d x):   %.2f decode tokens/s, an upper bound: ", n, n * b.predicted_decode_tokens_per_s);
  if (streamed_layers(b) > 0)
    std::printf("each replica streams %d layers every pass over the link they share; when the link bounds them, "
                "the replicas together decode about what one does\n",
                streamed_layers(b));
  else
    std::printf("every layer is resident in each replica; on one device they still share its compute\n");
}

nlohmann::json replicas_json(const ReplicaSplit& split, const MemoryPlan& plan) {
  const BudgetPlan& b = plan.budgets.front();
  return {{"count", split.replicas},
          {"vram_bytes_total", split.vram_total},
          {"ram_bytes_total", split.ram_total},
          {"vram_bytes_each", split.vram_each()},
          {"ram_bytes_each", split.ram_each()},
          {"streamed_layers_each", streamed_layers(b)},
          {"predicted_decode_tokens_per_s_each", b.predicted_decode_tokens_per_s},
          {"predicted_decode_tokens_per_s_aggregate", split.replicas * b.predicted_decode_tokens_per_s}};
}

}  // namespace layerstream::cli

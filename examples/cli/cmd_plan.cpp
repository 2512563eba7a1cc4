// `layerstream plan MODEL`: how much device memory the model needs and how
// fast it would run at each budget, without running it (Model::plan): each
// part's bytes, the minimum budget, the all-resident budget, and per budget
// the placement and predicted decode / prefill tokens/s from box figures
// (--box probe.json, or measured now). With --replicas N: the plan of one of
// N replicas sharing --vram and --ram (cmd_plan_replicas.h).
#include <cstdio>
#include <iostream>
#include <string>

#include "examples/cli/cli_common.h"
#include "examples/cli/cmd_plan_replicas.h"
#include "layerstream/model.h"
#include "layerstream/units.h"
#include "runtime/core/status_macros.h"

namespace layerstream::cli {
namespace {

class PlanCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    add_model_or_shape_args(sub, model_, po_.shape, "plan");
    sub.add_option("--ctx", po_.context, "Context length (0: min(model, 2048))");
    sub.add_option("--batch", po_.sequences, "Sequences decoded together")->capture_default_str();
    add_kv_type_flag(sub, kv_type_);
    sub.add_option("--prefill-chunk", po_.prefill_chunk, "Max tokens of one pass")->capture_default_str();
    sub.add_option("--box", po_.box, "`layerstream probe --json` file with the box's figures (default: measure now)");
    sub.add_option("--vram", vram_, "Answer for this one device budget (e.g. 512MiB)");
    sub.add_option("--ram", ram_, "Pinned RAM budget for RAM-tier layers (default 0)");
    sub.add_option("--replicas", split_.replicas,
                   "Plan N replicas sharing --vram and --ram equally: one's plan, and the aggregate tokens/s");
    sub.add_option("--budgets", po_.budgets, "Rows between the minimum and all-resident budgets")->capture_default_str();
    sub.add_option("--backend", backend_, "auto, host or cuda")->capture_default_str();
    sub.add_option("--sim-link", po_.sim_link_gbps, "Host backend: throttle H2D copies to GB/s");
    sub.add_option("--host-threads", po_.host_threads, "Host backend compute threads (0 = all cores)");
    add_io_flag(sub, io_);
    add_json_flag(sub, json_, "Write the plan as JSON to FILE");
    sub.add_option("--decode-pos", po_.decode_position,
                   "Predict decode at this context position (attention over it; default: the middle of --ctx)");
  }

  int run() override {
    if (Status s = parse_flags(); !s.ok()) return usage_error(s.message());
    if (model_.empty() == po_.shape.empty()) return usage_error("give a GGUF model file or --shape (one of them)");
    if (!po_.shape.empty() && po_.box.empty()) return usage_error("--shape needs --box FILE (the figures to plan with)");
    if (model_.empty()) model_ = "shape " + po_.shape;
    auto plan = Model::plan(model_, po_);
    if (!plan.ok()) return fail(plan.status());
    print(*plan);
    const bool replicas_fit = split_.replicas > 0 && plan->budgets.front().fits;
    if (replicas_fit) print_replicas(split_, *plan);
    if (!json_.empty()) {
      nlohmann::json j = to_json(*plan);
      if (replicas_fit) j["replicas"] = replicas_json(split_, *plan);
      if (Status s = write_json_file(json_, j); !s.ok()) return fail(s);
    }
    if (split_.replicas > 0)
      if (Status s = check_replica_share_fits(split_, *plan); !s.ok()) return fail(s);
    if (po_.vram_budget && !plan->budgets.front().fits)
      return fail(Status::OutOfBudget("vram budget " + format_bytes(po_.vram_budget) + " (" +
                                      std::to_string(po_.vram_budget) + " bytes) is below the minimum " +
                                      format_bytes(plan->min_vram_bytes) + " (" +
                                      std::to_string(plan->min_vram_bytes) + " bytes) for context " +
                                      std::to_string(plan->context) + " x " + std::to_string(plan->sequences) +
                                      " sequences, " + std::string(name_of(plan->kv_type)) +
                                      " KV: " + plan->budgets.front().placement));
    return kExitOk;
  }

 private:
  Status parse_flags() {
    LS_ASSIGN_OR_RETURN(po_.kv_type, kv_type_from_name(kv_type_));
    LS_ASSIGN_OR_RETURN(po_.backend, backend_from_name(backend_));
    LS_ASSIGN_OR_RETURN(po_.io, io_path_from_name(io_));
    if (!vram_.empty()) {
      LS_ASSIGN_OR_RETURN(po_.vram_budget, parse_size_flag("--vram", vram_));
    }
    if (!ram_.empty()) {
      LS_ASSIGN_OR_RETURN(po_.ram_budget, parse_size_flag("--ram", ram_));
    }
    if (po_.sequences < 1) return Status::InvalidArgument("--batch must be >= 1");
    if (split_.replicas != 0) {
      split_.vram_total = po_.vram_budget;
      split_.ram_total = po_.ram_budget;
      LS_RETURN_IF_ERROR(apply_replica_share(split_, po_));
    }
    return Status::OK();
  }

  static void print(const MemoryPlan& p) {
    std::printf("model %s\n", p.model.c_str());
    std::printf("  weights        %12s  (largest layer, one window slot: %s)\n", format_bytes(p.weight_bytes).c_str(),
                format_bytes(p.largest_layer_bytes).c_str());
    std::printf("  KV cache       %12s  (%d positions x %d sequences, %s)\n", format_bytes(p.kv_bytes).c_str(),
                p.context, p.sequences, std::string(name_of(p.kv_type)).c_str());
    std::printf("  activations    %12s  (%d tokens per pass, logits, scratch)\n",
                format_bytes(p.activation_bytes).c_str(), p.pass_tokens);
    std::printf("minimum VRAM budget:  %s (%llu bytes): KV + activations + the smallest window the planner accepts\n",
                format_bytes(p.min_vram_bytes).c_str(), static_cast<unsigned long long>(p.min_vram_bytes));
    std::printf("all resident at:      %s (%llu bytes)\n", format_bytes(p.all_resident_vram_bytes).c_str(),
                static_cast<unsigned long long>(p.all_resident_vram_bytes));
    std::printf("figures: %s (link %.2f GB/s, disk %.2f GB/s); compute from %s, decode at position %d\n",
                p.figures_source.c_str(), p.link_gbps, p.disk_gbps, p.compute_source.c_str(), p.decode_position);
    if (p.copy_alone_gbps > 0)
      std::printf("host copies: %.2f GB/s alone, %.2f GB/s beside compute, %.3f ns of compute per copied byte\n",
                  p.copy_alone_gbps, p.copy_beside_compute_gbps, p.copy_compute_ns_per_byte);
    std::printf("\n");
    std::printf("%12s %10s %9s %5s %5s %6s %14s %15s\n", "vram", "ram", "resident", "ram", "disk", "slots",
                "decode tok/s", "prefill tok/s");
    for (const BudgetPlan& b : p.budgets) {
      if (!b.fits) {
        std::printf("%12s %10s  does not run: %s\n", format_bytes(b.vram_bytes).c_str(),
                    format_bytes(b.ram_bytes).c_str(), b.placement.c_str());
        continue;
      }
      char prefill[32] = "n/a (no prefill rates)";
      if (b.predicted_prefill_tokens_per_s > 0)
        std::snprintf(prefill, sizeof prefill, "%.1f", b.predicted_prefill_tokens_per_s);
      std::printf("%12s %10s %9d %5d %5d %6d %14.2f %15s\n", format_bytes(b.vram_bytes).c_str(),
                  format_bytes(b.ram_bytes).c_str(), b.layers_resident, b.layers_ram, b.layers_disk, b.slots,
                  b.predicted_decode_tokens_per_s, prefill);
    }
  }

  static nlohmann::json to_json(const MemoryPlan& p) {
    nlohmann::json budgets = nlohmann::json::array();
    for (const BudgetPlan& b : p.budgets)
      budgets.push_back({{"vram_bytes", b.vram_bytes},
                         {"ram_bytes", b.ram_bytes},
                         {"fits", b.fits},
                         {"layers", {{"resident", b.layers_resident}, {"ram", b.layers_ram}, {"disk", b.layers_disk}}},
                         {"slots", b.slots},
                         {"placement", b.placement},
                         {"predicted_decode_pass_s", b.predicted_decode_pass_s},
                         {"predicted_decode_tokens_per_s", b.predicted_decode_tokens_per_s},
                         {"predicted_prefill_tokens_per_s", b.predicted_prefill_tokens_per_s}});
    return {{"model", p.model},
            {"context", p.context},
            {"sequences", p.sequences},
            {"pass_tokens", p.pass_tokens},
            {"kv_type", std::string(name_of(p.kv_type))},
            {"weight_bytes", p.weight_bytes},
            {"largest_layer_bytes", p.largest_layer_bytes},
            {"kv_bytes", p.kv_bytes},
            {"activation_bytes", p.activation_bytes},
            {"min_vram_bytes", p.min_vram_bytes},
            {"all_resident_vram_bytes", p.all_resident_vram_bytes},
            {"decode_position", p.decode_position},
            {"figures",
             {{"source", p.figures_source},
              {"link_gbps", p.link_gbps},
              {"disk_gbps", p.disk_gbps},
              {"compute", p.compute_source},
              {"copy_alone_gbps", p.copy_alone_gbps},
              {"copy_beside_compute_gbps", p.copy_beside_compute_gbps},
              {"copy_compute_ns_per_byte", p.copy_compute_ns_per_byte}}},
            {"budgets", budgets}};
  }

  std::string model_, vram_, ram_, json_, kv_type_ = "f32", backend_ = "auto", io_ = "auto";
  PlanOptions po_;
  ReplicaSplit split_;
};

}  // namespace

LS_REGISTER_COMMAND(PlanCommand, "plan", "How much memory a model needs and how fast it runs at each budget");

}  // namespace layerstream::cli

// Model::plan: how much device memory a model needs and how fast it runs at
// each budget, worked out from the file and measured box figures without
// running the model ("how much VRAM do I really need?" as a table).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layerstream/options.h"

namespace layerstream {

struct PlanOptions {
  int context = 0;            // positions per sequence (0 = min(model context, 2048))
  int sequences = 1;          // sequences decoded together (the batch)
  int prefill_chunk = 256;
  KvType kv_type = KvType::kF32;
  Backend backend = Backend::kAuto;
  double sim_link_gbps = 0;
  int host_threads = 0;
  IoPath io = IoPath::kAuto;
  // A `layerstream probe --json` file with the box's figures; empty: measure
  // them now (link and disk bandwidth, matmul rates of the model's types).
  std::string box;
  // A model shape instead of a file (needs `box`; nothing of a file is read):
  // a preset ("llama-70b-q4_k_m") or "layers=80,hidden=8192,ffn=28672,
  // heads=64,kv_heads=8,vocab=128256,dtype=q4_k_m" (docs/BOX_PROFILE.md).
  std::string shape;
  uint64_t vram_budget = 0;   // > 0: answer for this one budget only
  uint64_t ram_budget = 0;    // pinned RAM for RAM-tier layers in every row
  int budgets = 8;            // rows between the minimum and all-resident budgets
  // Decode is predicted at this context position (attention reads that many
  // cached positions per layer); -1: the middle of the context.
  int decode_position = -1;
};

// A mixture of experts at one budget with experts as placement units: every
// dense part (attention, router, norms; the head) resident, per layer the
// experts a token picks most resident, the rest computed on the host from RAM
// or fetched to the device when picked (the cheaper per hit); and llama.cpp's
// --n-cpu-moe N at the same budget. Expected figures under uniform routing
// (no routing statistics are measured before a run). The executor does not
// place experts one by one yet: this is the prediction for the expert-level
// placement; what runs today is the layer-level row (BudgetPlan above).
struct ExpertBudgetPlan {
  bool fits = false;           // false: KV, activations and the dense parts do not fit (why in `note`)
  std::string note;
  int resident_min = 0, resident_max = 0;  // resident experts per layer (least, most)
  uint64_t resident_total = 0;             // resident experts, all layers
  uint64_t resident_bytes = 0;
  std::string rest;            // where the other experts run: "host", "fetched", "host+fetched"; "" when none
  double decode_tokens_per_s = 0, prefill_tokens_per_s = 0;  // prefill 0: the box has no prefill rates
  double decode_fetch_bytes_per_token = 0;  // expected expert bytes over the link per decoded token
  // llama.cpp's --n-cpu-moe N: every expert of the first N MoE layers on the
  // host (copied to the device for batches of >= 32 tokens, as llama.cpp's
  // op offload does), everything else on the device; the smallest N that
  // fits. -1: does not fit, or no host figures to predict the host with.
  int n_cpu_moe = -1;
  double n_cpu_moe_decode_tokens_per_s = 0, n_cpu_moe_prefill_tokens_per_s = 0;
};

// One budget's placement and predicted speed.
struct BudgetPlan {
  uint64_t vram_bytes = 0, ram_bytes = 0;
  bool fits = false;                    // false: below the minimum (why in `placement`)
  int layers_resident = 0, layers_ram = 0, layers_disk = 0, slots = 0;
  std::string placement;                // the planner's plan, for people
  double predicted_decode_pass_s = 0;   // one pass of `sequences` tokens
  double predicted_decode_tokens_per_s = 0;
  double predicted_prefill_tokens_per_s = 0;  // passes of prefill_chunk tokens (0: the box has no prefill rates)
  ExpertBudgetPlan experts;             // mixtures of experts only (MemoryPlan::experts > 0)
};

struct MemoryPlan {
  std::string model;
  int context = 0, sequences = 0, pass_tokens = 0;
  KvType kv_type = KvType::kF32;
  // The parts (bytes).
  uint64_t weight_bytes = 0;         // every layer's file bytes
  uint64_t largest_layer_bytes = 0;  // one window slot
  uint64_t kv_bytes = 0;             // KV cache of context x sequences
  uint64_t activation_bytes = 0;     // activations, logits, scratch
  // The least that runs with the planned strategy: KV + activations, and a
  // window slot unless every block can compute on the host (then none).
  uint64_t min_vram_bytes = 0;
  uint64_t all_resident_vram_bytes = 0;  // KV + activations + every layer resident
  // A mixture of experts (experts > 0; 0: a dense model): experts per MoE
  // layer and per token, the MoE layers, the largest layer's bytes of one
  // expert, every expert's bytes, the rest of the weights (dense parts and
  // head), and the expected expert bytes one decoded token reads (used x an
  // expert's bytes, summed over layers).
  int experts = 0, experts_used = 0, moe_layers = 0;
  uint64_t expert_bytes = 0, all_experts_bytes = 0, dense_bytes = 0;
  uint64_t active_expert_bytes_per_token = 0;
  // The least an expert-level placement needs: KV + activations + every
  // dense part resident (each rounded to the slot alignment), no expert.
  uint64_t expert_min_vram_bytes = 0;
  // The figures predictions come from.
  std::string figures_source;        // "box file X" or "measured now"
  double link_gbps = 0, disk_gbps = 0;
  int decode_position = 0;           // the context position decode is predicted at
  // How per-layer compute was estimated: "block probe" (one block and the
  // head run with the model's kernels, measured now) or "matmul rates".
  std::string compute_source;
  // Host backend, measured now: a memcpy's rate alone (the plan's copy rate
  // there) and beside the decode compute, and the compute a copied byte takes
  // from it (0 when not measured: independent copy and compute lanes).
  double copy_alone_gbps = 0;
  double copy_beside_compute_gbps = 0;
  double copy_compute_ns_per_byte = 0;
  std::vector<BudgetPlan> budgets;   // increasing vram_bytes
};

}  // namespace layerstream

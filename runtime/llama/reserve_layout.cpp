#include "runtime/llama/reserve_layout.h"

#include <algorithm>
#include <string>

#include "layerstream/units.h"
#include "runtime/llama/runner_strategy.h"
#include "runtime/model/gguf_file.h"
#include "runtime/scheduler/min_budget.h"

namespace layerstream::llama {

namespace {
constexpr uint64_t kAlign = 256;
}  // namespace

Layout reserve_layout(const LlamaModel& m, int n_ctx, int n_seq, int t_max, GgmlType kv_type,
                      const kernels::Kernels& k, bool logits_all) {
  const LlamaHparams& h = m.hparams;
  Layout L;
  const uint64_t T = t_max, S = n_seq, e = h.n_embd, hd = h.head_dim;
  const uint64_t nq = uint64_t{h.n_head} * hd, nkv = uint64_t{h.n_head_kv} * hd;
  const uint64_t kv_elt = kv_type == GgmlType::F16 ? 2 : 4;
  L.kv_plane = sched::round_up(uint64_t(n_ctx) * nkv * kv_elt, kAlign);
  L.kv_bytes = L.kv_plane * 2 * h.n_layers * S;
  uint64_t off = L.kv_bytes;
  auto take = [&](uint64_t bytes) {
    uint64_t at = off;
    off += sched::round_up(std::max<uint64_t>(bytes, 1), kAlign);
    return at;
  };
  L.x = take(T * e * 4);
  L.xb = take(T * e * 4);
  L.q = take(T * nq * 4);
  L.k = take(T * nkv * 4);
  L.v = take(T * nkv * 4);
  L.att = take(T * nq * 4);
  L.tmp = take(T * e * 4);
  L.gate = take(T * uint64_t{h.n_ff} * 4);
  L.up = take(T * uint64_t{h.n_ff} * 4);
  const uint64_t R = logits_all ? std::max(T, S) : S;
  L.head_rows = static_cast<int>(R);
  L.hrows = take(R * e * 4);
  L.hlogits = take(R * uint64_t{h.n_vocab} * 4);
  L.out_norm = take(e * 4);
  L.rope_freqs = take(m.rope_freqs ? m.rope_freqs->n_bytes : 0);
  L.tokens = take(T * 4);
  L.positions = take(T * 4);
  L.emb_rows = take(T * ggml_row_bytes(ggml_type_traits(m.token_embd.type), e));
  uint64_t scratch = 0;
  auto need = [&](const GgufTensorInfo& t, int64_t n_tok) {
    scratch = std::max(scratch, k.matmul_scratch_bytes(t.type, t.dims.size() > 1 ? t.dims[1] : 1, t.dims[0], n_tok));
  };
  for (const LlamaBlock& b : m.blocks) {
    for (const GgufTensorInfo* t : b.matrices()) need(*t, T);
    if (b.moe) {  // the router and an expert's slices see at most every token of the pass
      for (const GgufTensorInfo* t : {&b.moe->router, &b.moe->gate_exps, &b.moe->up_exps, &b.moe->down_exps})
        scratch = std::max(scratch, k.matmul_scratch_bytes(t->type, t->dims[1], t->dims[0], int64_t(T)));
    }
  }
  need(m.output, R);
  if (h.is_moe()) {
    L.moe_work_bytes = kernels::moe_work_bytes(int64_t(T), e, h.n_ff_exp, h.n_expert, h.n_expert_used);
    L.moe_work = take(L.moe_work_bytes);
  }
  L.scratch_bytes = scratch;
  L.scratch = scratch ? take(scratch) : off;
  L.total = off;
  return L;
}

int context_for(const LlamaHparams& h, int n_ctx) {
  const int model_ctx = h.n_ctx_train ? static_cast<int>(std::min<uint32_t>(h.n_ctx_train, 1u << 30)) : 2048;
  return n_ctx ? n_ctx : std::min(model_ctx, 2048);
}

int pass_tokens_for(int n_ctx, int n_seq, int prefill_chunk) {
  return static_cast<int>(std::max(std::min<int64_t>(prefill_chunk, int64_t{n_ctx} * n_seq), int64_t{n_seq}));
}

Status check_runner_options(const RunnerOptions& o) {
  if (o.kv_type != GgmlType::F32 && o.kv_type != GgmlType::F16)
    return Status::InvalidArgument("KV cache type must be f32 or f16, got " + ggml_type_name(uint32_t(o.kv_type)));
  if (o.n_seq < 1) return Status::InvalidArgument("number of sequences must be >= 1, got " + std::to_string(o.n_seq));
  if (o.prefill_chunk < 1)
    return Status::InvalidArgument("prefill chunk must be >= 1, got " + std::to_string(o.prefill_chunk));
  if (o.n_ctx < 0) return Status::InvalidArgument("context length must be >= 0, got " + std::to_string(o.n_ctx));
  return Status::OK();
}

namespace {

// "context C with f16 KV (--ctx C --kv-type f16)" for the longest context
// (halving from n_ctx) that fits `budget` with each KV type worth trying.
std::vector<std::string> what_fits(const LlamaModel& m, const RunnerOptions& o, int n_ctx,
                                   const std::vector<sched::LayerSpec>& layers, bool disk_direct,
                                   const kernels::Kernels& k) {
  std::vector<std::string> fits;
  for (GgmlType kv : {o.kv_type, GgmlType::F16}) {
    if (kv == GgmlType::F16 && o.kv_type == GgmlType::F16) break;
    for (int c = n_ctx; c >= 16; c /= 2) {
      const int t = pass_tokens_for(c, o.n_seq, o.prefill_chunk);
      const uint64_t reserve = reserve_layout(m, c, o.n_seq, t, kv, k, o.logits_all).total;
      if (min_vram_for(layers, reserve, o, disk_direct) <= o.vram_budget) {
        fits.push_back("context " + std::to_string(c) + " with " + (kv == GgmlType::F16 ? "f16" : "f32") +
                       " KV (--ctx " + std::to_string(c) + (kv == GgmlType::F16 ? " --kv-type f16)" : ")"));
        break;
      }
    }
  }
  return fits;
}

}  // namespace

Status budget_too_small(const LlamaModel& m, const RunnerOptions& o, int n_ctx,
                        const std::vector<sched::LayerSpec>& layers, bool disk_direct, const Layout& L,
                        const kernels::Kernels& k) {
  const uint64_t budget = o.vram_budget, need = min_vram_for(layers, L.total, o, disk_direct);
  const sched::HostPolicy policy = host_policy_for(o);
  const uint64_t largest = sched::device_span_floor(layers, policy);
  // Under a host policy only the layers that cannot run on the host (the
  // head) need VRAM, not a window of blocks.
  const std::string what = policy == sched::HostPolicy::kNever
                               ? "one window (largest layer " + format_bytes(largest)
                               : "the layers kept on the device (largest " + format_bytes(largest) +
                                     "; host-site blocks need none";
  std::string msg = "vram budget " + format_bytes(budget) + " (" + std::to_string(budget) +
                    " bytes) cannot hold the KV cache and activations (" + format_bytes(L.total) + ", of which KV " +
                    format_bytes(L.kv_bytes) + " " + std::string(o.kv_type == GgmlType::F16 ? "f16" : "f32") +
                    " for " + std::to_string(n_ctx) + " positions x " + std::to_string(o.n_seq) +
                    " sequences) plus " + what + ", strategy " + std::string(strategy_name(o.strategy)) +
                    "): need at least " + std::to_string(need) + " bytes (" + format_bytes(need) + ")";
  const std::vector<std::string> fits = what_fits(m, o, n_ctx, layers, disk_direct, k);
  if (!fits.empty()) msg += "; at this budget fits " + fits[0] + (fits.size() > 1 ? ", or " + fits[1] : "");
  return Status::OutOfBudget(msg);
}

}  // namespace layerstream::llama

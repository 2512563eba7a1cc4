#include "runtime/llama/llama_runner.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <unordered_map>
#include <utility>

#include "kernels/cpu/ops.h"
#include "kernels/kernels.h"
#include "layerstream/units.h"
#include "io/reader.h"
#include "runtime/core/log.h"
#include "runtime/device/host/host_device.h"
#include "runtime/model/gguf_file.h"
#include "runtime/scheduler/min_budget.h"
#include "runtime/scheduler/planner.h"

namespace layerstream::llama {

using kernels::Kernels;
using sched::LayerRun;
using sched::LayerSpec;
using sched::Tier;

std::string_view strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kResident: return "resident";
    case Strategy::kSerial: return "serial";
    case Strategy::kOverlap: return "overlap";
    case Strategy::kPlanned: return "planned";
    case Strategy::kHost: return "host";
  }
  return "?";
}

Result<Strategy> parse_strategy(std::string_view name) {
  for (Strategy s : {Strategy::kResident, Strategy::kSerial, Strategy::kOverlap, Strategy::kPlanned, Strategy::kHost})
    if (strategy_name(s) == name) return s;
  return Status::InvalidArgument("unknown strategy '" + std::string(name) +
                                 "' (choices: resident, serial, overlap, planned, host)");
}

Result<sched::ExecutorOptions> executor_options_for(const RunnerOptions& o, const std::vector<LayerSpec>& layers,
                                                    const DeviceInfo& info, uint64_t reserved_bytes) {
  sched::ExecutorOptions e;
  e.vram_budget = o.vram_budget;
  e.ram_budget = o.ram_budget;
  e.reserved_vram = reserved_bytes;
  e.link_gbps = o.link_gbps;
  e.disk_gbps = o.disk_gbps;
  e.reader = o.reader;
  e.trace = o.trace;
  e.load_progress = o.load_progress;
  if (o.staging_buffer_bytes) e.staging_buffer_bytes = o.staging_buffer_bytes;
  if (o.staging_buffers) e.staging_buffers = o.staging_buffers;
  switch (o.strategy) {
    case Strategy::kResident:
      e.auto_replan = false;
      break;
    case Strategy::kSerial:
      e.serial = true;
      e.auto_replan = false;
      break;
    case Strategy::kOverlap: {
      if (o.overlap_slots < 1)
        return Status::InvalidArgument("overlap_slots must be >= 1, got " + std::to_string(o.overlap_slots));
      sched::CostModel cost(static_cast<int>(layers.size()));
      sched::PlannerInput in = sched::layer_planner_input(layers);
      if (reserved_bytes > o.vram_budget)
        return Status::OutOfBudget("vram budget " + format_bytes(o.vram_budget) +
                                   " cannot hold the KV cache and activations (" + format_bytes(reserved_bytes) + ")");
      in.vram_budget = o.vram_budget - reserved_bytes;
      in.ram_budget = o.ram_budget;
      in.staging_bytes = e.staging_buffer_bytes * e.staging_buffers;
      in.cost = &cost;
      in.disk_direct = info.host_addressable && !e.force_staging;
      in.chunk_bytes = e.copy_chunk_bytes;
      LS_ASSIGN_OR_RETURN(sched::Plan plan, sched::plan_first_fit(in, o.overlap_slots));
      e.plan = std::move(plan);
      e.auto_replan = false;
      break;
    }
    case Strategy::kPlanned:
      if (o.plan) e.plan = *o.plan;
      e.host_compute_factor = o.host_compute_factor;
      e.host_policy = o.host_compute_factor > 0 ? sched::HostPolicy::kChoose : sched::HostPolicy::kNever;
      break;
    case Strategy::kHost:
      e.host_compute_factor = std::max(1.0, o.host_compute_factor);
      e.host_policy = sched::HostPolicy::kAll;
      break;
  }
  return e;
}

namespace {

constexpr uint64_t kAlign = 256;

// Offsets of the reserved region's buffers (bytes from its start).
struct Layout {
  uint64_t kv = 0, kv_plane = 0;  // KV base, bytes of one [n_ctx][n_kv][hd] plane
  uint64_t x = 0, xb = 0, q = 0, k = 0, v = 0, att = 0, tmp = 0, gate = 0, up = 0;
  uint64_t hrows = 0, hlogits = 0, seq_logits = 0, out_norm = 0, rope_freqs = 0, tokens = 0, positions = 0;
  uint64_t emb_rows = 0;  // the pass's token_embd rows, gathered on the host [T][row bytes]
  uint64_t scratch = 0, scratch_bytes = 0;
  uint64_t kv_bytes = 0, total = 0;
};

struct Segment {
  int seq = 0;
  int start_pos = 0;
  int n = 0;
  int row = 0;  // first row in the pass's activations
};

// A row of the pass whose logits the head computes: copied to host memory at
// `host` (n_vocab floats) and, when seq >= 0, to that sequence's device
// logits (for sample()).
struct LogitRow {
  int row = 0;
  float* host = nullptr;
  int seq = -1;
};


// Carves the reserved region: per sequence slot a KV cache, then the
// activations of t_max tokens, the head's n_seq rows and matmul scratch.
// logits_all: the head computes every token's logits (t_max rows, not n_seq).
Layout reserve_layout(const LlamaModel& m, int n_ctx, int n_seq, int t_max, GgmlType kv_type, const Kernels& k,
                      bool logits_all) {
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
  const uint64_t R = logits_all ? std::max(T, S) : S;  // rows the head computes logits for at once
  L.hrows = take(R * e * 4);
  L.hlogits = take(R * uint64_t{h.n_vocab} * 4);
  L.seq_logits = take(S * uint64_t{h.n_vocab} * 4);
  L.out_norm = take(e * 4);
  L.rope_freqs = take(m.rope_freqs ? m.rope_freqs->n_bytes : 0);
  L.tokens = take(T * 4);
  L.positions = take(T * 4);
  L.emb_rows = take(T * ggml_row_bytes(ggml_type_traits(m.token_embd.type), e));
  uint64_t scratch = 0;
  auto need = [&](const GgufTensorInfo& t, int64_t n_tok) {
    scratch = std::max(scratch, k.matmul_scratch_bytes(t.type, t.dims.size() > 1 ? t.dims[1] : 1, t.dims[0], n_tok));
  };
  for (const LlamaBlock& b : m.blocks)
    for (const GgufTensorInfo* t : b.matrices())
      need(*t, T);
  need(m.output, R);
  L.scratch_bytes = scratch;
  L.scratch = scratch ? take(scratch) : off;
  L.total = off;
  return L;
}

// The file bytes one executor layer streams: its span, or for a tied head
// token_embd's (output_norm then lives in the reserve).
std::pair<uint64_t, uint64_t> layer_extent(const LlamaModel& m, const ModelLayer& ml) {
  if (ml.kind == LayerKind::kHead && m.output_tied) return {m.token_embd.offset, m.token_embd.n_bytes};
  return {ml.span_begin, ml.span_bytes()};
}

// Positions per sequence, and tokens per pass, that these options give.
int context_for(const LlamaHparams& h, int n_ctx) {
  const int model_ctx = h.n_ctx_train ? static_cast<int>(std::min<uint32_t>(h.n_ctx_train, 1u << 30)) : 2048;
  return n_ctx ? n_ctx : std::min(model_ctx, 2048);
}
int pass_tokens_for(int n_ctx, int n_seq, int prefill_chunk) {
  return static_cast<int>(std::max(std::min<int64_t>(prefill_chunk, int64_t{n_ctx} * n_seq), int64_t{n_seq}));
}


// The smallest VRAM budget at which the executor finds a placement for
// `layers` next to a reserve of `reserve_bytes` under the strategy (asked of
// the scheduler: all resident, the serial or first-fit baseline, or the
// planner).
// The executor's site policy for these options (executor_options_for's).
sched::HostPolicy host_policy_for(const RunnerOptions& o) {
  if (o.strategy == Strategy::kHost) return sched::HostPolicy::kAll;
  if (o.strategy == Strategy::kPlanned && o.host_compute_factor > 0) return sched::HostPolicy::kChoose;
  return sched::HostPolicy::kNever;
}

// Blocks may compute on the host site (the head stays on the device): under
// a host policy, or a given plan with host or split sites.
bool blocks_host_ok(const RunnerOptions& o) {
  return host_policy_for(o) != sched::HostPolicy::kNever ||
         (o.strategy == Strategy::kPlanned && o.plan &&
          o.plan->count_site(sched::Site::kHost) + o.plan->count_site(sched::Site::kSplit) > 0);
}

uint64_t min_vram_for(const std::vector<LayerSpec>& layers, uint64_t reserve_bytes, const RunnerOptions& o,
                      bool disk_direct) {
  sched::MinBudgetQuery q;
  q.host_policy = host_policy_for(o);
  q.reserve_bytes = reserve_bytes;
  q.ram_budget = o.ram_budget;
  q.disk_direct = disk_direct;
  q.all_resident = o.strategy == Strategy::kResident;
  q.serial = o.strategy == Strategy::kSerial;
  q.first_fit = o.strategy == Strategy::kOverlap;
  q.first_fit_slots = o.overlap_slots;
  return sched::min_vram_budget(layers, q);
}

// OutOfBudget for a budget below the minimum: names what the options need
// (the KV cache among it) and what would fit at this budget: a shorter
// context, or an f16 KV cache.
Status budget_too_small(const LlamaModel& m, const RunnerOptions& o, int n_ctx, const std::vector<LayerSpec>& layers,
                        bool disk_direct, const Layout& L, const Kernels& k) {
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
  // What fits at this budget: the longest context (halving) per KV type.
  std::vector<std::string> fits;
  for (GgmlType kv : {o.kv_type, GgmlType::F16}) {
    if (kv == GgmlType::F16 && o.kv_type == GgmlType::F16) break;
    for (int c = n_ctx; c >= 16; c /= 2) {
      const int t = pass_tokens_for(c, o.n_seq, o.prefill_chunk);
      if (min_vram_for(layers, reserve_layout(m, c, o.n_seq, t, kv, k, o.logits_all).total, o, disk_direct) <= budget) {
        fits.push_back("context " + std::to_string(c) + " with " + (kv == GgmlType::F16 ? "f16" : "f32") +
                       " KV (--ctx " + std::to_string(c) + (kv == GgmlType::F16 ? " --kv-type f16)" : ")"));
        break;
      }
    }
  }
  if (!fits.empty()) msg += "; at this budget fits " + fits[0] + (fits.size() > 1 ? ", or " + fits[1] : "");
  return Status::OutOfBudget(msg);
}

// InvalidArgument for options no model could run with.
Status check_runner_options(const RunnerOptions& o) {
  if (o.kv_type != GgmlType::F32 && o.kv_type != GgmlType::F16)
    return Status::InvalidArgument("KV cache type must be f32 or f16, got " + ggml_type_name(uint32_t(o.kv_type)));
  if (o.n_seq < 1) return Status::InvalidArgument("number of sequences must be >= 1, got " + std::to_string(o.n_seq));
  if (o.prefill_chunk < 1)
    return Status::InvalidArgument("prefill chunk must be >= 1, got " + std::to_string(o.prefill_chunk));
  if (o.n_ctx < 0) return Status::InvalidArgument("context length must be >= 0, got " + std::to_string(o.n_ctx));
  return Status::OK();
}

}  // namespace

struct LlamaRunner::Impl {
  Device& dev;
  RunnerOptions opt;
  GgufFile file;
  LlamaModel m;
  std::unique_ptr<Kernels> k;
  std::unique_ptr<sched::Executor> exec;
  std::vector<uint64_t> span_begin;  // per executor layer: file offset of run.data
  Layout lay;
  int n_ctx = 0, n_seq = 1, t_max = 1;
  std::vector<int> pos;  // per sequence
  HostBuffer tokens_host, pos_host, logits_host;
  // Token embedding: never a streamed layer. Each pass gathers its tokens'
  // rows on the host (from the tied head's RAM copy or host-readable resident
  // region when there is one, else from the file) and sends them with the
  // activations; the device embeds them from that small table.
  HostBuffer emb_rows_host, row_ids_host;  // [T][emb_row_bytes], ids 0..T-1
  uint64_t emb_row_bytes = 0;
  int emb_fd = -1;
  int head_layer = -1;  // executor index of the head
  std::string path;
  HostBuffer pass_logits_host;  // logits_all: [t_max][n_vocab] of the last pass
  std::vector<float> out_norm_host;  // tied head: output_norm weights
  std::vector<float> rope_freqs_host;  // Llama 3.1 RoPE frequency factors
  int32_t sampled = 0;
  // The pass being run.
  std::vector<Segment> segs;
  std::vector<LogitRow> logit_rows;
  int pass_tokens = 0;

  explicit Impl(Device& d) : dev(d) {}
  ~Impl() {
    exec.reset();
    if (emb_fd >= 0) ::close(emb_fd);
  }

  char* base() const { return static_cast<char*>(exec->reserved().ptr); }
  float* f(uint64_t off) const { return reinterpret_cast<float*>(base() + off); }
  void* kv_plane(int seq, int layer, int which) const {
    const uint64_t idx = (static_cast<uint64_t>(seq) * m.hparams.n_layers + layer) * 2 + which;
    return base() + lay.kv + idx * lay.kv_plane;
  }
  const void* tensor(const LayerRun& run, int layer, const GgufTensorInfo& t) const {
    if (opt.external_weights) return opt.external_weights->base + t.offset;
    return static_cast<const char*>(run.data) + (t.offset - span_begin[layer]);
  }

  // create()'s steps, in order.
  Status open_model(GgufFile file);
  Status size_reserve(const RunnerOptions& o, BackendKind backend);
  Result<std::vector<LayerSpec>> layer_specs(const RunnerOptions& o);
  Status fit_budget(RunnerOptions& o, const std::vector<LayerSpec>& layers) const;
  Status alloc_host_buffers();
  Status create_executor(std::vector<LayerSpec> layers);
  Status load_reserve_tensors();

  Status gather_embedding_rows(int n_tokens);
  Status embed(Stream& s);
  Status block(const LayerRun& run, Stream& s, int b);
  Status attention(const LayerRun& run, Stream& s, int b);
  Status ffn(const LayerRun& run, Stream& s, int b);
  Status post_norm(const LayerRun& run, Stream& s, const std::optional<GgufTensorInfo>& norm);
  Status head(const LayerRun& run, Stream& s);
  Status run_segments(std::vector<Segment> segs, const std::vector<const int32_t*>& toks);
  Status run_pass(std::vector<Segment> segs, const std::vector<const int32_t*>& toks, std::vector<LogitRow> rows);
  void clear_kv_suffix(int seq, int from);
  Status matmul(Stream& s, const void* w, const GgufTensorInfo& t, const float* x, float* y, int n_tokens);
  // One matmul of a block's pass: split by rows on a split site, else with
  // the weight's packed copy where one applies (use_packed).
  Status block_matmul(const LayerRun& run, Kernels& kern, Stream& s, const void* w, const GgufTensorInfo& t,
                      const float* x, float* y, int n_tokens, char* b);
  kernels::MatmulParams matmul_params(const void* w, const GgufTensorInfo& t, const float* x, float* y, int n_tokens,
                                      char* b) const;
  // Hybrid execution (host-site blocks; see the end of this file).
  HostBuffer host_res;              // host mirror of the reserve layout: activations, host-site KV, rope_freqs
  std::unique_ptr<Kernels> hk;      // the CPU kernels host-site blocks run with
  // Packed copies (Kernels::pack_weight) of resident weights for one-token
  // passes, by tensor file offset: a tensor's bytes are its file's, wherever
  // they sit, so a copy stays right for the runner's life. Host memory inside
  // the budget's room (packed_cap; the CPU kernels: Q4_1 only, its own size
  // again), in huge-page chunks like the host arena (the kernels stream
  // through it).
  std::vector<HostBuffer> packed_chunks;
  uint64_t packed_chunk_used = 0;
  std::unordered_map<uint64_t, void*> packed;
  // At most this many bytes of packed copies (0: none are made). They live in
  // the budget's room: made only when every layer is resident (a placement
  // no re-plan grows), only as far as the budget has room beside the reserve
  // and the layers, and never past half the host memory available
  // (MemAvailable), so a model that barely fits in RAM runs without them
  // (slower decode, same bits) rather than swapping.
  uint64_t packed_cap = 0;
  // The packed copies every block's weights would take (0 where the kernels
  // have no packed layout): what the default budget adds on the host.
  uint64_t packable_bytes() const;
  bool packed_capped = false;  // logged that the cap was reached
  uint64_t packed_bytes = 0;
  // Sets p.w_packed from t's packed copy when this pass can use one (one
  // token, resident weights, not split, kernels with a layout for it),
  // enqueueing the packing on s the first time.
  Status use_packed(const LayerRun& run, Kernels& kern, Stream& s, const GgufTensorInfo& t, kernels::MatmulParams& p);
  // The packed copies of the resident blocks' weights, made at load time
  // (else the first one-token pass makes them: tens of ms that `run` would
  // count in its first token). Layers made resident later pack lazily.
  Status pack_residents();
  std::vector<sched::Site> kv_site; // per block: where its KV cache is
  Status init_host_site(sched::ExecutorOptions& eo);
  Status move_kv(const sched::Plan& from, const sched::Plan& to);
  // Split blocks (sched::Site::kSplit): a matmul's output rows divided
  // between the device (rows [0, r), from the window) and the host lane
  // (rows [r, n), from the layer's host bytes), joined on the device.
  HostBuffer split_tmp;             // per matmul of a group, the halves before the join: [T][r] + [T][n - r]
  std::unique_ptr<Event> split_x_ev, split_y_ev;  // x on the host / the device half's output on the host
  Status init_split();
  struct SplitOut {
    const GgufTensorInfo* t;
    float* y;  // [T][n_out] on the device
  };
  Status split_matmuls(const LayerRun& run, Stream& s, const float* x, int n_tokens, std::initializer_list<SplitOut> outs);
  std::vector<sched::SplitTensor> split_tensors(int b, int layer) const;
  char* host_base() const { return static_cast<char*>(host_res.data()); }
  char* site_base(sched::Site s) const { return s == sched::Site::kHost ? host_base() : base(); }
  Kernels& site_kernels(sched::Site s) const { return s == sched::Site::kHost ? *hk : *k; }
  void* kv_plane_at(char* b, int seq, int layer, int which) const {
    const uint64_t idx = (static_cast<uint64_t>(seq) * m.hparams.n_layers + layer) * 2 + which;
    return b + lay.kv + idx * lay.kv_plane;
  }
};

Status LlamaRunner::Impl::matmul(Stream& s, const void* w, const GgufTensorInfo& t, const float* x, float* y,
                                 int n_tokens) {
  return k->matmul(matmul_params(w, t, x, y, n_tokens, base()), s);
}

Status LlamaRunner::Impl::block_matmul(const LayerRun& run, Kernels& kern, Stream& s, const void* w,
                                       const GgufTensorInfo& t, const float* x, float* y, int n_tokens, char* b) {
  if (run.site == sched::Site::kSplit) return split_matmuls(run, s, x, n_tokens, {{&t, y}});
  kernels::MatmulParams p = matmul_params(w, t, x, y, n_tokens, b);
  LS_RETURN_IF_ERROR(use_packed(run, kern, s, t, p));
  return kern.matmul(p, s);
}

Status LlamaRunner::Impl::use_packed(const LayerRun& run, Kernels& kern, Stream& s, const GgufTensorInfo& t,
                                     kernels::MatmulParams& p) {
  if (p.n_tokens != 1 || run.tier != sched::Tier::kResident || run.site == sched::Site::kSplit) return Status::OK();
  const uint64_t bytes = kern.packed_weight_bytes(p.w_type, p.n_out, p.n_in);
  if (bytes == 0) return Status::OK();
  auto it = packed.find(t.offset);
  if (it == packed.end()) {
    if (packed_bytes + bytes > packed_cap) {
      if (!packed_capped && packed_cap > 0) {
        LS_LOG_INFO("llama: no packed copy of {} and later tensors: {} packed already, the room is {} (the budget's "
                    "room beside the layers, at most half the available RAM); their one-token products read the "
                    "GGUF rows", t.name, format_bytes(packed_bytes), format_bytes(packed_cap));
        packed_capped = true;
      }
      return Status::OK();
    }
    constexpr uint64_t kChunk = 32ull << 20, kAlign = 64;
    const uint64_t need = (bytes + kAlign - 1) / kAlign * kAlign;
    if (packed_chunks.empty() || packed_chunk_used + need > packed_chunks.back().size()) {
      const size_t size = std::max<uint64_t>(kChunk, (need + (2u << 20) - 1) / (2u << 20) * (2u << 20));
      auto chunk = host::alloc_pages(size);
      if (!chunk.ok()) return chunk.status().WithContext("no host memory for a packed copy of " + t.name);
      packed_chunks.push_back(std::move(*chunk));
      packed_chunk_used = 0;
    }
    void* out = static_cast<char*>(packed_chunks.back().data()) + packed_chunk_used;
    LS_RETURN_IF_ERROR(kern.pack_weight(p, out, s));  // in stream order: after the weights are in place
    packed_chunk_used += need;
    packed_bytes += bytes;
    LS_LOG_DEBUG("llama: packed {} for one-token passes ({} B; {} B packed in all)", t.name, bytes, packed_bytes);
    it = packed.emplace(t.offset, out).first;
  }
  p.w_packed = it->second;
  return Status::OK();
}

uint64_t LlamaRunner::Impl::packable_bytes() const {
  uint64_t sum = 0;
  for (const ModelLayer& ml : m.layers) {
    if (ml.kind != LayerKind::kBlock) continue;
    const LlamaBlock& w = m.blocks[ml.block];
    for (const GgufTensorInfo* t : w.matrices())
      if (t->dims.size() == 2) sum += k->packed_weight_bytes(t->type, static_cast<int64_t>(t->dims[1]),
                                                              static_cast<int64_t>(t->dims[0]));
  }
  return sum;
}

Status LlamaRunner::Impl::pack_residents() {
  if (opt.external_weights) return Status::OK();  // read in place: no copies
  const sched::Plan& plan = exec->plan();
  if (plan.count(sched::Tier::kResident) != static_cast<int>(plan.tiers.size())) return Status::OK();
  uint64_t used = lay.total;
  for (uint64_t b : exec->layer_bytes()) used += sched::round_up(b, sched::kSlotAlignment);
  if (opt.vram_budget <= used) return Status::OK();
  packed_cap = std::min<uint64_t>(opt.vram_budget - used, host::available_ram() / 2);
  Stream& s = exec->compute_stream();
  int layer = 0;  // executor index: the model's layers without the embedding
  for (const ModelLayer& ml : m.layers) {
    if (ml.kind == LayerKind::kEmbedding) continue;
    const int L = layer++;
    if (ml.kind != LayerKind::kBlock) continue;  // every layer is resident (above)
    const void* view = exec->resident_host_view(L);
    if (!view) continue;  // device memory the host cannot read: the device's kernels
    LayerRun run;
    run.layer = L;
    run.data = const_cast<void*>(view);
    run.tier = sched::Tier::kResident;
    const LlamaBlock& w = m.blocks[ml.block];
    for (const GgufTensorInfo* t : w.matrices()) {
      kernels::MatmulParams p = matmul_params(tensor(run, L, *t), *t, nullptr, nullptr, 1, base());
      LS_RETURN_IF_ERROR(use_packed(run, *k, s, *t, p));
    }
  }
  LS_RETURN_IF_ERROR(s.synchronize());
  if (packed_bytes) LS_LOG_INFO("llama: packed {} of resident weights for one-token passes", format_bytes(packed_bytes));
  return Status::OK();
}

kernels::MatmulParams LlamaRunner::Impl::matmul_params(const void* w, const GgufTensorInfo& t, const float* x, float* y,
                                                       int n_tokens, char* b) const {
  kernels::MatmulParams p;
  p.w = w;
  p.w_type = t.type;
  p.n_in = static_cast<int64_t>(t.dims[0]);
  p.n_out = static_cast<int64_t>(t.dims.size() > 1 ? t.dims[1] : 1);
  p.x = x;
  p.y = y;
  p.n_tokens = n_tokens;
  if (lay.scratch_bytes) {
    p.scratch = b + lay.scratch;
    p.scratch_bytes = lay.scratch_bytes;
  }
  return p;
}

Status LlamaRunner::Impl::gather_embedding_rows(int T) {
  const auto* ids = static_cast<const int32_t*>(tokens_host.data());
  auto* rows = static_cast<uint8_t*>(emb_rows_host.data());
  const GgufTensorInfo& te = m.token_embd;
  // A host-readable copy of token_embd: the tied head's RAM-tier buffer or
  // its resident region on a host-addressable device.
  const uint8_t* table = nullptr;
  if (m.output_tied && head_layer >= 0 && !opt.external_weights) {  // external: the placeholder is no copy
    const void* base = exec->ram_copy(head_layer);
    if (!base) base = exec->resident_host_view(head_layer);
    if (base) table = static_cast<const uint8_t*>(base) + (te.offset - span_begin[head_layer]);
  }
  for (int t = 0; t < T; ++t) {
    const uint64_t off = static_cast<uint64_t>(ids[t]) * emb_row_bytes;
    if (table) {
      std::memcpy(rows + t * emb_row_bytes, table + off, emb_row_bytes);
      continue;
    }
    uint64_t done = 0;
    while (done < emb_row_bytes) {
      const ssize_t r = ::pread(emb_fd, rows + t * emb_row_bytes + done, emb_row_bytes - done,
                                static_cast<off_t>(te.offset + off + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno("read of token_embd row " + std::to_string(ids[t]) + " from " + path, errno);
      if (r == 0)
        return Status::IOError(path + ": token_embd row " + std::to_string(ids[t]) + " at offset " +
                               std::to_string(te.offset + off) + " is past the end of the file");
      done += static_cast<uint64_t>(r);
    }
  }
  return Status::OK();
}

Status LlamaRunner::Impl::embed(Stream& s) {
  const int T = pass_tokens;
  LS_RETURN_IF_ERROR(s.copy_h2d(base() + lay.emb_rows, emb_rows_host.data(), T * emb_row_bytes));
  LS_RETURN_IF_ERROR(s.copy_h2d(base() + lay.tokens, row_ids_host.data(), T * sizeof(int32_t)));
  LS_RETURN_IF_ERROR(s.copy_h2d(base() + lay.positions, pos_host.data(), T * sizeof(int32_t)));
  kernels::EmbeddingParams p;
  p.table = base() + lay.emb_rows;
  p.type = m.token_embd.type;
  p.n_vocab = T;  // the gathered rows: row t holds token t's embedding
  p.n_embd = m.hparams.n_embd;
  p.tokens = reinterpret_cast<const int32_t*>(base() + lay.tokens);
  p.n_tokens = T;
  p.out = f(lay.x);
  LS_RETURN_IF_ERROR(k->embedding(p, s));
  if (!m.hparams.traits.embed_scale) return Status::OK();
  const int64_t n = int64_t{T} * m.hparams.n_embd;
  return k->scale({f(lay.x), f(lay.x), n, std::sqrt(static_cast<float>(m.hparams.n_embd))}, s);
}

// One block: x += attention(norm(x)); x += ffn(norm(x)).
Status LlamaRunner::Impl::block(const LayerRun& run, Stream& s, int b) {
  LS_RETURN_IF_ERROR(attention(run, s, b));
  return ffn(run, s, b);
}

// The post-attention / post-FFN norm of traits.post_norms, in place on tmp.
Status LlamaRunner::Impl::post_norm(const LayerRun& run, Stream& s, const std::optional<GgufTensorInfo>& nt) {
  if (!nt) return Status::OK();
  const LlamaHparams& h = m.hparams;
  float* tmp = reinterpret_cast<float*>(site_base(run.site) + lay.tmp);  // the block's site (see attention)
  return site_kernels(run.site).rmsnorm(
      {tmp, static_cast<const float*>(tensor(run, run.layer, *nt)), tmp, pass_tokens, h.n_embd, h.rms_eps}, s);
}

// x += attention over the pass's segments (Q/K/V with optional biases and
// QK norms, RoPE, each segment against its sequence's KV cache).
Status LlamaRunner::Impl::attention(const LayerRun& run, Stream& s, int b) {
  const LlamaHparams& h = m.hparams;
  const LlamaBlock& w = m.blocks[b];
  const int T = pass_tokens;
  const int64_t e = h.n_embd, hd = h.head_dim, nq = int64_t{h.n_head} * hd, nkv = int64_t{h.n_head_kv} * hd;
  const int L = run.layer;
  // The site decides where the activations, the KV cache and the kernels are
  // (a host-site block runs the CPU kernels on host memory whatever the backend).
  char* const B = site_base(run.site);
  Kernels& K = site_kernels(run.site);
  auto f = [B](uint64_t off) { return reinterpret_cast<float*>(B + off); };
  auto kv_plane = [&](int seq, int layer, int which) { return kv_plane_at(B, seq, layer, which); };
  auto matmul = [&](Stream& st, const void* w, const GgufTensorInfo& t, const float* x, float* y, int n) {
    return block_matmul(run, K, st, w, t, x, y, n, B);
  };
  float *x = f(lay.x), *xb = f(lay.xb), *q = f(lay.q), *kk = f(lay.k), *v = f(lay.v), *att = f(lay.att),
        *tmp = f(lay.tmp);
  const auto* positions = reinterpret_cast<const int32_t*>(B + lay.positions);

  kernels::RmsNormParams n1{x, static_cast<const float*>(tensor(run, L, w.attn_norm)), xb, T, e, h.rms_eps};
  LS_RETURN_IF_ERROR(K.rmsnorm(n1, s));
  if (run.site == sched::Site::kSplit) {  // one join for the three
    LS_RETURN_IF_ERROR(split_matmuls(run, s, xb, T, {{&w.attn_q, q}, {&w.attn_k, kk}, {&w.attn_v, v}}));
  } else {
    // One call for the three (the CPU kernels quantise xb once and run them as one job).
    kernels::MatmulParams qkv[] = {matmul_params(tensor(run, L, w.attn_q), w.attn_q, xb, q, T, B),
                                   matmul_params(tensor(run, L, w.attn_k), w.attn_k, xb, kk, T, B),
                                   matmul_params(tensor(run, L, w.attn_v), w.attn_v, xb, v, T, B)};
    LS_RETURN_IF_ERROR(use_packed(run, K, s, w.attn_q, qkv[0]));
    LS_RETURN_IF_ERROR(use_packed(run, K, s, w.attn_k, qkv[1]));
    LS_RETURN_IF_ERROR(use_packed(run, K, s, w.attn_v, qkv[2]));
    LS_RETURN_IF_ERROR(K.matmuls(qkv, 3, s));
  }
  auto bias = [&](const std::optional<GgufTensorInfo>& bt, float* y, int64_t width) -> Status {
    if (!bt) return Status::OK();
    const auto* bp = static_cast<const float*>(tensor(run, L, *bt));
    for (int t = 0; t < T; ++t) LS_RETURN_IF_ERROR(K.add({y + t * width, bp, y + t * width, width}, s));
    return Status::OK();
  };
  LS_RETURN_IF_ERROR(bias(w.attn_q_bias, q, nq));
  LS_RETURN_IF_ERROR(bias(w.attn_k_bias, kk, nkv));
  LS_RETURN_IF_ERROR(bias(w.attn_v_bias, v, nkv));
  if (w.attn_q_norm) {  // traits.qk_norm: every head of every token is one row
    const auto* qn = static_cast<const float*>(tensor(run, L, *w.attn_q_norm));
    const auto* kn = static_cast<const float*>(tensor(run, L, *w.attn_k_norm));
    LS_RETURN_IF_ERROR(K.rmsnorm({q, qn, q, int64_t{T} * h.n_head, hd, h.rms_eps}, s));
    LS_RETURN_IF_ERROR(K.rmsnorm({kk, kn, kk, int64_t{T} * h.n_head_kv, hd, h.rms_eps}, s));
  }
  kernels::RopeParams rp;
  rp.n_tokens = T;
  rp.head_dim = hd;
  rp.n_rot = h.n_rot;
  rp.positions = positions;
  rp.freq_base = h.rope_base(static_cast<uint32_t>(b));
  rp.freq_factors = m.rope_freqs ? f(lay.rope_freqs) : nullptr;
  rp.freq_scale = h.rope_scaling_type == "linear" && h.rope_scaling_factor > 0 ? 1.0f / h.rope_scaling_factor : 1.0f;
  rp.neox = h.rope_neox;
  rp.x = q;
  rp.n_heads = h.n_head;
  LS_RETURN_IF_ERROR(K.rope(rp, s));
  rp.x = kk;
  rp.n_heads = h.n_head_kv;
  LS_RETURN_IF_ERROR(K.rope(rp, s));
  for (const Segment& sg : segs) {
    kernels::AttentionParams ap;
    ap.q = q + sg.row * nq;
    ap.k_new = kk + sg.row * nkv;
    ap.v_new = v + sg.row * nkv;
    ap.k_cache = kv_plane(sg.seq, b, 0);
    ap.v_cache = kv_plane(sg.seq, b, 1);
    ap.kv_type = opt.kv_type;
    ap.n_ctx = n_ctx;
    ap.start_pos = sg.start_pos;
    ap.n_tokens = sg.n;
    ap.n_head = h.n_head;
    ap.n_kv_head = h.n_head_kv;
    ap.head_dim = hd;
    ap.scale = h.attn_scale;
    ap.window = h.is_swa(static_cast<uint32_t>(b)) ? h.n_swa : 0;
    ap.out = att + sg.row * nq;
    LS_RETURN_IF_ERROR(K.attention(ap, s));
  }
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, L, w.attn_output), w.attn_output, att, tmp, T));
  LS_RETURN_IF_ERROR(post_norm(run, s, w.attn_post_norm));
  return K.add({x, tmp, x, T * e}, s);
}

// x += ffn_down(act(ffn_gate(norm(x))) * ffn_up(norm(x))).
Status LlamaRunner::Impl::ffn(const LayerRun& run, Stream& s, int b) {
  const LlamaHparams& h = m.hparams;
  const LlamaBlock& w = m.blocks[b];
  const int T = pass_tokens;
  const int64_t e = h.n_embd;
  const int L = run.layer;
  // The block's site: host memory and the CPU kernels for a host-site block.
  char* const B = site_base(run.site);
  Kernels& K = site_kernels(run.site);
  auto f = [B](uint64_t off) { return reinterpret_cast<float*>(B + off); };
  auto matmul = [&](Stream& st, const void* w, const GgufTensorInfo& t, const float* x, float* y, int n) {
    return block_matmul(run, K, st, w, t, x, y, n, B);
  };
  float *x = f(lay.x), *xb = f(lay.xb), *tmp = f(lay.tmp), *gate = f(lay.gate), *up = f(lay.up);
  kernels::RmsNormParams n2{x, static_cast<const float*>(tensor(run, L, w.ffn_norm)), xb, T, e, h.rms_eps};
  LS_RETURN_IF_ERROR(K.rmsnorm(n2, s));
  if (run.site == sched::Site::kSplit) {  // one join for both
    LS_RETURN_IF_ERROR(split_matmuls(run, s, xb, T, {{&w.ffn_gate, gate}, {&w.ffn_up, up}}));
  } else {
    kernels::MatmulParams gate_up[] = {matmul_params(tensor(run, L, w.ffn_gate), w.ffn_gate, xb, gate, T, B),
                                       matmul_params(tensor(run, L, w.ffn_up), w.ffn_up, xb, up, T, B)};
    LS_RETURN_IF_ERROR(use_packed(run, K, s, w.ffn_gate, gate_up[0]));
    LS_RETURN_IF_ERROR(use_packed(run, K, s, w.ffn_up, gate_up[1]));
    LS_RETURN_IF_ERROR(K.matmuls(gate_up, 2, s));
  }
  const int64_t n_ff = int64_t{T} * h.n_ff;
  if (h.traits.ffn == FfnActivation::kGeluTanh) {
    LS_RETURN_IF_ERROR(K.gelu_mul({gate, up, gate, n_ff}, s));
  } else {
    LS_RETURN_IF_ERROR(K.silu_mul({gate, up, gate, n_ff}, s));
  }
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, L, w.ffn_down), w.ffn_down, gate, tmp, T));
  LS_RETURN_IF_ERROR(post_norm(run, s, w.ffn_post_norm));
  return K.add({x, tmp, x, T * e}, s);
}

Status LlamaRunner::Impl::head(const LayerRun& run, Stream& s) {
  const LlamaHparams& h = m.hparams;
  const int64_t e = h.n_embd, V = h.n_vocab;
  float *hrows = f(lay.hrows), *hl = f(lay.hlogits);
  const float* norm_w = m.output_tied ? f(lay.out_norm)
                                      : static_cast<const float*>(tensor(run, run.layer, m.output_norm));
  if (opt.logits_all) {
    // Every token's logits of the pass (perplexity): with logits_all the head
    // buffers hold t_max rows. The rows asked for below are computed again.
    const int R = pass_tokens;
    LS_RETURN_IF_ERROR(s.copy_d2d(hrows, f(lay.x), uint64_t(R) * e * sizeof(float)));
    kernels::RmsNormParams np{hrows, norm_w, hrows, R, e, h.rms_eps};
    LS_RETURN_IF_ERROR(k->rmsnorm(np, s));
    LS_RETURN_IF_ERROR(matmul(s, tensor(run, run.layer, m.output), m.output, hrows, hl, R));
    LS_RETURN_IF_ERROR(s.copy_d2h(pass_logits_host.data(), hl, uint64_t(R) * V * sizeof(float)));
  }
  // The head buffers hold n_seq rows: larger requests go in groups (the
  // stream is in order, so a group's copies finish before the next overwrites).
  for (size_t first = 0; first < logit_rows.size(); first += n_seq) {
    const int R = static_cast<int>(std::min<size_t>(n_seq, logit_rows.size() - first));
    for (int i = 0; i < R; ++i)
      LS_RETURN_IF_ERROR(s.copy_d2d(hrows + i * e, f(lay.x) + int64_t(logit_rows[first + i].row) * e, e * sizeof(float)));
    kernels::RmsNormParams np{hrows, norm_w, hrows, R, e, h.rms_eps};
    LS_RETURN_IF_ERROR(k->rmsnorm(np, s));
    LS_RETURN_IF_ERROR(matmul(s, tensor(run, run.layer, m.output), m.output, hrows, hl, R));
    for (int i = 0; i < R; ++i) {
      const LogitRow& lr = logit_rows[first + i];
      if (lr.seq >= 0) LS_RETURN_IF_ERROR(s.copy_d2d(f(lay.seq_logits) + int64_t(lr.seq) * V, hl + i * V, V * sizeof(float)));
      LS_RETURN_IF_ERROR(s.copy_d2h(lr.host, hl + i * V, V * sizeof(float)));
    }
  }
  return Status::OK();
}

// The legacy pass: logits for the last token of each segment, into
// logits_host and the device logits of its sequence.
Status LlamaRunner::Impl::run_segments(std::vector<Segment> sg, const std::vector<const int32_t*>& toks) {
  std::vector<LogitRow> rows;
  int row = 0;
  for (const Segment& s : sg) {
    row += s.n;
    rows.push_back({row - 1, static_cast<float*>(logits_host.data()) + int64_t(s.seq) * m.hparams.n_vocab, s.seq});
  }
  return run_pass(std::move(sg), toks, std::move(rows));
}

// One executor pass over `sg` (rows assigned here, in order); `rows` name
// the pass rows whose logits the head computes.
Status LlamaRunner::Impl::run_pass(std::vector<Segment> sg, const std::vector<const int32_t*>& toks,
                                   std::vector<LogitRow> rows) {
  int row = 0;
  auto* th = static_cast<int32_t*>(tokens_host.data());
  auto* ph = static_cast<int32_t*>(pos_host.data());
  for (size_t i = 0; i < sg.size(); ++i) {
    sg[i].row = row;
    for (int t = 0; t < sg[i].n; ++t) {
      const int32_t id = toks[i][t];
      if (id < 0 || id >= static_cast<int32_t>(m.hparams.n_vocab))
        return Status::InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                       std::to_string(m.hparams.n_vocab) + ")");
      th[row + t] = id;
      ph[row + t] = sg[i].start_pos + t;
    }
    row += sg[i].n;
  }
  segs = std::move(sg);
  logit_rows = std::move(rows);
  pass_tokens = row;
  LS_RETURN_IF_ERROR(gather_embedding_rows(row));
  LS_RETURN_IF_ERROR(embed(exec->compute_stream()));
  Status st = exec->run_pass(row);
  for (const Segment& s : segs)
    if (st.ok()) pos[s.seq] = s.start_pos + s.n;
  logit_rows.clear();
  return st;
}

LlamaRunner::LlamaRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaRunner::~LlamaRunner() = default;

Result<std::unique_ptr<LlamaRunner>> LlamaRunner::create(Device& device, const std::string& path,
                                                         RunnerOptions o) {
  LS_ASSIGN_OR_RETURN(GgufFile file, read_gguf_file(path));
  return create(device, path, std::move(file), std::move(o));
}

// The model, the options, the reserve's layout, the layers, the budget
// check, host buffers, the executor (which loads residents and the RAM
// tier), then the small tensors kept in the reserve.
Result<std::unique_ptr<LlamaRunner>> LlamaRunner::create(Device& device, const std::string& path, GgufFile file,
                                                         RunnerOptions o) {
  auto impl = std::make_unique<Impl>(device);
  Impl& I = *impl;
  I.path = path;
  LS_RETURN_IF_ERROR(I.open_model(std::move(file)));
  LS_RETURN_IF_ERROR(check_runner_options(o));
  LS_RETURN_IF_ERROR(I.size_reserve(o, device.info().backend));
  LS_ASSIGN_OR_RETURN(std::vector<LayerSpec> layers, I.layer_specs(o));
  LS_RETURN_IF_ERROR(I.fit_budget(o, layers));
  I.opt = o;
  LS_RETURN_IF_ERROR(I.alloc_host_buffers());
  LS_RETURN_IF_ERROR(I.create_executor(std::move(layers)));
  LS_RETURN_IF_ERROR(I.load_reserve_tensors());
  LS_RETURN_IF_ERROR(I.pack_residents());
  LS_LOG_INFO("llama: {} layers (blocks and head; the embedding is gathered), ctx {} x {} seq, reserve {} (KV {}), plan: {}",
              I.exec->layer_bytes().size(), I.n_ctx, I.n_seq, format_bytes(I.lay.total), format_bytes(I.lay.kv_bytes),
              sched::describe_plan(I.exec->plan(), I.exec->layer_bytes()));
  return std::unique_ptr<LlamaRunner>(new LlamaRunner(std::move(impl)));
}

Status LlamaRunner::Impl::open_model(GgufFile f) {
  file = std::move(f);
  auto mm = load_llama_model(file);
  if (!mm.ok()) return mm.status().WithContext(path);
  m = std::move(*mm);
  return Status::OK();
}

// Context, sequences and tokens per pass; the kernels; the reserve's layout;
// the embedding's row size (checked against the tensor).
Status LlamaRunner::Impl::size_reserve(const RunnerOptions& o, BackendKind backend) {
  const LlamaHparams& h = m.hparams;
  n_ctx = context_for(h, o.n_ctx);
  n_seq = o.n_seq;
  t_max = pass_tokens_for(n_ctx, n_seq, o.prefill_chunk);
  pos.assign(n_seq, 0);
  kernels::KernelsOptions ko;
  ko.host_threads = o.host_threads;
  ko.exact = o.exact;
  LS_ASSIGN_OR_RETURN(k, kernels::make_kernels(backend, ko));
  lay = reserve_layout(m, n_ctx, n_seq, t_max, o.kv_type, *k, o.logits_all);
  emb_row_bytes = ggml_row_bytes(ggml_type_traits(m.token_embd.type), h.n_embd);
  if (emb_row_bytes * h.n_vocab != m.token_embd.n_bytes)
    return Status::Corruption(path + ": token_embd.weight holds " + std::to_string(m.token_embd.n_bytes) +
                              " bytes, not " + std::to_string(h.n_vocab) + " rows of " + std::to_string(emb_row_bytes));
  return Status::OK();
}

// The executor's layers: blocks, head. The token embedding is not a layer
// (gathered per pass, see gather_embedding_rows); a tied head is the one
// layer holding token_embd's bytes. Records span_begin and head_layer.
Result<std::vector<LayerSpec>> LlamaRunner::Impl::layer_specs(const RunnerOptions& o) {
  std::vector<LayerSpec> layers;
  Impl* ip = this;
  for (size_t li = 0; li < m.layers.size(); ++li) {
    const ModelLayer& ml = m.layers[li];
    if (ml.kind == LayerKind::kEmbedding) continue;
    if (ml.kind == LayerKind::kHead) head_layer = static_cast<int>(layers.size());
    LayerSpec spec;
    spec.name = ml.name;
    spec.file = path;
    std::tie(spec.file_offset, spec.bytes) = layer_extent(m, ml);
    span_begin.push_back(spec.file_offset);
    spec.host_ok = ml.kind == LayerKind::kBlock && blocks_host_ok(o);  // as create_executor marks them
    if (li < o.pins.size()) spec.pin = o.pins[li];
    if (o.strategy == Strategy::kResident && !spec.pin) spec.pin = Tier::kResident;
    if (o.external_weights) {
      // The weights are read in place (tensor()); the executor keeps only a
      // resident placeholder so its passes, events and trace stay as usual.
      static const uint8_t kPlaceholder[sched::kSlotAlignment] = {};
      spec.file.clear();
      spec.file_offset = 0;
      spec.host_data = kPlaceholder;
      spec.bytes = sizeof(kPlaceholder);
      spec.pin = Tier::kResident;
    }
    switch (ml.kind) {
      case LayerKind::kEmbedding:
        break;
      case LayerKind::kBlock: {
        const int b = ml.block;
        if (!o.external_weights) spec.split_tensors = split_tensors(b, static_cast<int>(layers.size()));
        spec.compute = [ip, b](const LayerRun& r, Stream& s) {
          if (ip->opt.external_weights && ip->opt.external_weights->before_layer)
            LS_RETURN_IF_ERROR(ip->opt.external_weights->before_layer(r.layer, s));
          return ip->block(r, s, b);
        };
        break;
      }
      case LayerKind::kHead:
        spec.compute = [ip](const LayerRun& r, Stream& s) {
          if (ip->opt.external_weights && ip->opt.external_weights->before_layer)
            LS_RETURN_IF_ERROR(ip->opt.external_weights->before_layer(r.layer, s));
          return ip->head(r, s);
        };
        break;
    }
    layers.push_back(std::move(spec));
  }
  if (!o.pins.empty() && o.pins.size() != m.layers.size())
    return Status::InvalidArgument("pins has " + std::to_string(o.pins.size()) + " entries, the model has " +
                                   std::to_string(m.layers.size()) + " layers");
  return layers;
}

// Sets the default VRAM budget when none is given (everything resident on
// the host backend when it fits, else nine tenths of free memory) and checks
// the budget against the minimum before anything is allocated.
Status LlamaRunner::Impl::fit_budget(RunnerOptions& o, const std::vector<LayerSpec>& layers) const {
  const DeviceInfo& info = dev.info();
  if (o.vram_budget == 0) {
    uint64_t all_layers = 0;
    for (const LayerSpec& l : layers) all_layers += sched::round_up(l.bytes, sched::kSlotAlignment);
    // On the host, room for the packed copies of one-token passes too.
    const uint64_t want = lay.total + all_layers + packable_bytes() + (64ull << 20);
    const uint64_t avail = info.free_memory_bytes / 10 * 9;
    o.vram_budget = info.backend == BackendKind::kHost ? std::min(want, avail) : avail;
    LS_LOG_INFO("llama: no VRAM budget given; using {} ({} free on {})", format_bytes(o.vram_budget),
                format_bytes(info.free_memory_bytes), info.name);
  }
  const bool disk_direct = info.host_addressable;  // as the executor decides (no force_staging here)
  if (o.vram_budget < min_vram_for(layers, lay.total, o, disk_direct))
    return budget_too_small(m, o, n_ctx, layers, disk_direct, lay, *k);
  return Status::OK();
}

// Pinned host buffers of a pass (tokens, positions, logits, embedding rows)
// and the file descriptor the embedding rows are read through.
Status LlamaRunner::Impl::alloc_host_buffers() {
  const uint64_t T = t_max, S = n_seq, V = m.hparams.n_vocab;
  LS_ASSIGN_OR_RETURN(tokens_host, dev.alloc_pinned(T * 4));
  LS_ASSIGN_OR_RETURN(pos_host, dev.alloc_pinned(T * 4));
  LS_ASSIGN_OR_RETURN(logits_host, dev.alloc_pinned(S * V * 4));
  LS_ASSIGN_OR_RETURN(emb_rows_host, dev.alloc_pinned(T * emb_row_bytes));
  LS_ASSIGN_OR_RETURN(row_ids_host, dev.alloc_pinned(T * 4));
  for (uint64_t t = 0; t < T; ++t) static_cast<int32_t*>(row_ids_host.data())[t] = static_cast<int32_t>(t);
  emb_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (emb_fd < 0) return Status::FromErrno("open " + path, errno);
  std::memset(logits_host.data(), 0, logits_host.size());
  if (opt.logits_all) {
    LS_ASSIGN_OR_RETURN(pass_logits_host, dev.alloc_pinned(T * V * 4));
  }
  return Status::OK();
}

Status LlamaRunner::Impl::create_executor(std::vector<LayerSpec> layers) {
  LS_ASSIGN_OR_RETURN(sched::ExecutorOptions eo, executor_options_for(opt, layers, dev.info(), lay.total));
  // Hybrid execution: blocks may run on the host site (the head stays on the
  // device); the host mirror and the crossing hooks exist before the first plan.
  if (eo.host_policy != sched::HostPolicy::kNever ||
      (eo.plan && eo.plan->count_site(sched::Site::kHost) + eo.plan->count_site(sched::Site::kSplit) > 0)) {
    for (size_t i = 0; i < layers.size(); ++i) layers[i].host_ok = static_cast<int>(i) != head_layer;
    LS_RETURN_IF_ERROR(init_host_site(eo));
    LS_RETURN_IF_ERROR(init_split());
  }
  auto ex = sched::Executor::create(dev, std::move(layers), std::move(eo));
  if (!ex.ok()) return ex.status().WithContext(path);
  exec = std::move(*ex);
  return Status::OK();
}

// Small tensors kept in the reserve, read once through an io::Reader with
// the runner's reader options (and so its fault injection): output_norm of a
// tied head (the head streams token_embd's span), rope_freqs (used by every
// block).
Status LlamaRunner::Impl::load_reserve_tensors() {
  if (!m.output_tied && !m.rope_freqs) return Status::OK();
  LS_ASSIGN_OR_RETURN(std::unique_ptr<io::Reader> rd, io::open_reader(path, opt.reader));
  auto read_into_reserve = [&](const GgufTensorInfo& t, uint64_t reserve_off, std::vector<float>& host) -> Status {
    host.resize(t.n_bytes / 4);
    LS_RETURN_IF_ERROR(rd->read_span(t.offset, t.n_bytes, host.data()).WithContext("read " + t.name));
    Stream& s = exec->compute_stream();
    LS_RETURN_IF_ERROR(s.copy_h2d(f(reserve_off), host.data(), t.n_bytes));
    if (host_res.data()) std::memcpy(host_base() + reserve_off, host.data(), t.n_bytes);
    return s.synchronize();
  };
  if (m.output_tied) LS_RETURN_IF_ERROR(read_into_reserve(m.output_norm, lay.out_norm, out_norm_host));
  if (m.rope_freqs) LS_RETURN_IF_ERROR(read_into_reserve(*m.rope_freqs, lay.rope_freqs, rope_freqs_host));
  return Status::OK();
}

Result<RunnerFootprint> LlamaRunner::footprint(const std::string& path, const RunnerOptions& o, BackendKind backend) {
  LS_ASSIGN_OR_RETURN(GgufFile file, read_gguf_file(path));
  return footprint(file, o, backend);
}

Result<RunnerFootprint> LlamaRunner::footprint(const GgufFile& file, const RunnerOptions& o, BackendKind backend) {
  const std::string& path = file.path();
  auto mm = load_llama_model(file);
  if (!mm.ok()) return mm.status().WithContext(path);
  const LlamaModel& m = *mm;
  if (o.n_seq < 1) return Status::InvalidArgument("number of sequences must be >= 1, got " + std::to_string(o.n_seq));
  if (o.prefill_chunk < 1)
    return Status::InvalidArgument("prefill chunk must be >= 1, got " + std::to_string(o.prefill_chunk));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<Kernels> k, kernels::make_kernels(backend));
  RunnerFootprint f;
  f.n_ctx = context_for(m.hparams, o.n_ctx);
  f.n_seq = o.n_seq;
  f.max_pass_tokens = pass_tokens_for(f.n_ctx, f.n_seq, o.prefill_chunk);
  const Layout L = reserve_layout(m, f.n_ctx, f.n_seq, f.max_pass_tokens, o.kv_type, *k, o.logits_all);
  f.reserve = {L.kv_bytes, L.total - L.kv_bytes};
  uint64_t largest = 0;
  for (const ModelLayer& ml : m.layers) {
    if (ml.kind == LayerKind::kEmbedding) continue;  // gathered per pass, never a layer (as in create)
    LayerSpec spec;
    spec.name = ml.name;
    spec.file = path;
    std::tie(spec.file_offset, spec.bytes) = layer_extent(m, ml);
    spec.compute = [](const LayerRun&, Stream&) { return Status::OK(); };
    spec.host_ok = ml.kind == LayerKind::kBlock && blocks_host_ok(o);  // as create marks them
    largest = std::max(largest, sched::slot_span(spec));
    std::vector<RunnerFootprint::Matmul> mats;
    auto add = [&](const GgufTensorInfo& t) {
      mats.push_back({t.type, int64_t(t.dims.size() > 1 ? t.dims[1] : 1), int64_t(t.dims[0]), t.n_bytes});
    };
    if (ml.kind == LayerKind::kBlock) {
      const LlamaBlock& b = m.blocks[ml.block];
      for (const GgufTensorInfo* t : b.matrices())
        add(*t);
    } else if (ml.kind == LayerKind::kHead) {
      add(m.output);
      f.head_layer = static_cast<int>(f.layers.size());
    }
    f.layers.push_back(std::move(spec));
    f.matmuls.push_back(std::move(mats));
  }
  f.min_vram_budget = min_vram_for(f.layers, L.total, o, backend == BackendKind::kHost);
  return f;
}

Status LlamaRunner::prefill(int seq, std::span<const int32_t> tokens) {
  std::vector<int> seqs{seq};
  std::vector<std::vector<int32_t>> prompts{std::vector<int32_t>(tokens.begin(), tokens.end())};
  return prefill_many(seqs, prompts);
}

Status LlamaRunner::prefill_many(std::span<const int> seqs, std::span<const std::vector<int32_t>> prompts) {
  Impl& I = *impl_;
  if (seqs.size() != prompts.size())
    return Status::InvalidArgument("prefill: " + std::to_string(seqs.size()) + " sequences but " +
                                   std::to_string(prompts.size()) + " prompts");
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int s = seqs[i];
    if (s < 0 || s >= I.n_seq)
      return Status::InvalidArgument("sequence " + std::to_string(s) + " is outside [0, " + std::to_string(I.n_seq) + ")");
    if (prompts[i].empty()) return Status::InvalidArgument("prefill: the prompt of sequence " + std::to_string(s) + " is empty");
    if (I.pos[s] + prompts[i].size() > static_cast<size_t>(I.n_ctx))
      return Status::InvalidArgument("prompt of " + std::to_string(prompts[i].size()) + " tokens at position " +
                                     std::to_string(I.pos[s]) + " is longer than the context (" +
                                     std::to_string(I.n_ctx) + " tokens; raise --ctx)");
  }
  std::vector<size_t> done(seqs.size(), 0);
  for (;;) {
    std::vector<Segment> sg;
    std::vector<const int32_t*> toks;
    int budget = I.t_max;
    for (size_t i = 0; i < seqs.size() && budget > 0; ++i) {
      const size_t left = prompts[i].size() - done[i];
      if (!left) continue;
      const int n = static_cast<int>(std::min<size_t>(left, budget));
      sg.push_back({seqs[i], I.pos[seqs[i]], n, 0});
      toks.push_back(prompts[i].data() + done[i]);
      done[i] += n;
      budget -= n;
    }
    if (sg.empty()) return Status::OK();
    LS_RETURN_IF_ERROR(I.run_segments(std::move(sg), toks));
  }
}

Status LlamaRunner::decode(std::span<const int> seqs, std::span<const int32_t> tokens) {
  Impl& I = *impl_;
  if (seqs.size() != tokens.size() || seqs.empty())
    return Status::InvalidArgument("decode: " + std::to_string(seqs.size()) + " sequences but " +
                                   std::to_string(tokens.size()) + " tokens");
  std::vector<bool> seen(I.n_seq, false);
  std::vector<Segment> sg;
  std::vector<const int32_t*> toks;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int s = seqs[i];
    if (s < 0 || s >= I.n_seq || seen[s])
      return Status::InvalidArgument("decode: sequence " + std::to_string(s) + " is outside [0, " +
                                     std::to_string(I.n_seq) + ") or repeated");
    seen[s] = true;
    if (I.pos[s] >= I.n_ctx)
      return Status::InvalidArgument("sequence " + std::to_string(s) + " is full: the context holds " +
                                     std::to_string(I.n_ctx) + " tokens");
    sg.push_back({s, I.pos[s], 1, 0});
    toks.push_back(&tokens[i]);
  }
  return I.run_segments(std::move(sg), toks);
}

Status LlamaRunner::decode_tokens(std::span<const PassToken> tokens, float* logits_out) {
  Impl& I = *impl_;
  if (tokens.empty()) return Status::InvalidArgument("decode: the batch has no tokens");
  // Per sequence, in order of first appearance: its tokens (batch indices).
  std::vector<int> order;
  std::vector<std::vector<int>> of_seq(I.n_seq);
  int n_logits = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const PassToken& t = tokens[i];
    if (t.seq < 0 || t.seq >= I.n_seq)
      return Status::InvalidArgument("decode: token " + std::to_string(i) + " has sequence " + std::to_string(t.seq) +
                                     ", outside [0, " + std::to_string(I.n_seq) + ")");
    std::vector<int>& mine = of_seq[t.seq];
    const int want = I.pos[t.seq] + static_cast<int>(mine.size());
    if (t.pos != want)
      return Status::InvalidArgument("decode: token " + std::to_string(i) + " of sequence " + std::to_string(t.seq) +
                                     " is at position " + std::to_string(t.pos) + " but the sequence continues at " +
                                     std::to_string(want) + " (positions must follow on; remove a suffix first)");
    if (t.pos >= I.n_ctx)
      return Status::InvalidArgument("decode: sequence " + std::to_string(t.seq) + " is full: the context holds " +
                                     std::to_string(I.n_ctx) + " tokens");
    if (mine.empty()) order.push_back(t.seq);
    mine.push_back(static_cast<int>(i));
    if (t.logits) ++n_logits;
  }
  if (n_logits > 0 && logits_out == nullptr) return Status::InvalidArgument("decode: logits requested but no output");
  // Logits row of each requested token: its rank among requested tokens, in batch order.
  std::vector<int> out_row(tokens.size(), -1);
  for (int i = 0, k = 0; i < static_cast<int>(tokens.size()); ++i)
    if (tokens[i].logits) out_row[i] = k++;
  const size_t V = I.m.hparams.n_vocab;
  // Passes of at most t_max tokens, sequences in order, long ones split.
  std::vector<size_t> done(I.n_seq, 0);
  size_t next_seq = 0;
  std::vector<std::vector<int32_t>> ids;  // per segment (kept alive for the pass)
  while (next_seq < order.size()) {
    std::vector<Segment> sg;
    std::vector<const int32_t*> toks;
    std::vector<LogitRow> rows;
    ids.clear();
    ids.reserve(order.size());
    int budget = I.t_max, row = 0;
    while (next_seq < order.size() && budget > 0) {
      const int seq = order[next_seq];
      const std::vector<int>& mine = of_seq[seq];
      const size_t n = std::min<size_t>(mine.size() - done[seq], budget);
      std::vector<int32_t>& seg_ids = ids.emplace_back();
      for (size_t j = 0; j < n; ++j) {
        const int bi = mine[done[seq] + j];
        seg_ids.push_back(tokens[bi].token);
        if (out_row[bi] >= 0) rows.push_back({row + static_cast<int>(j), logits_out + out_row[bi] * V, -1});
      }
      sg.push_back({seq, I.pos[seq], static_cast<int>(n), 0});
      toks.push_back(seg_ids.data());
      done[seq] += n;
      budget -= static_cast<int>(n);
      row += static_cast<int>(n);
      if (done[seq] == mine.size()) ++next_seq;
    }
    LS_RETURN_IF_ERROR(I.run_pass(std::move(sg), toks, std::move(rows)));
  }
  return Status::OK();
}

Status LlamaRunner::copy_sequence(int src, int dst) {
  Impl& I = *impl_;
  if (src < 0 || src >= I.n_seq || dst < 0 || dst >= I.n_seq)
    return Status::InvalidArgument("copy_sequence: " + std::to_string(src) + " -> " + std::to_string(dst) +
                                   " outside [0, " + std::to_string(I.n_seq) + ")");
  if (src == dst) return Status::OK();
  const LlamaHparams& h = I.m.hparams;
  const uint64_t row_bytes = uint64_t{h.n_head_kv} * h.head_dim * (I.opt.kv_type == GgmlType::F16 ? 2 : 4);
  const uint64_t bytes = row_bytes * I.pos[src];
  Stream& s = I.exec->compute_stream();
  for (uint32_t layer = 0; layer < h.n_layers; ++layer)
    for (int which = 0; which < 2; ++which)
      LS_RETURN_IF_ERROR(s.copy_d2d(I.kv_plane(dst, layer, which), I.kv_plane(src, layer, which), bytes));
  LS_RETURN_IF_ERROR(s.synchronize());
  if (I.host_res.data())  // host-site blocks' KV caches
    for (uint32_t layer = 0; layer < h.n_layers; ++layer)
      for (int which = 0; which < 2; ++which)
        std::memcpy(I.kv_plane_at(I.host_base(), dst, layer, which), I.kv_plane_at(I.host_base(), src, layer, which), bytes);
  I.pos[dst] = I.pos[src];
  return Status::OK();
}

Status LlamaRunner::truncate(int seq, int n_positions) {
  Impl& I = *impl_;
  if (seq < 0 || seq >= I.n_seq)
    return Status::InvalidArgument("sequence " + std::to_string(seq) + " is outside [0, " + std::to_string(I.n_seq) + ")");
  if (n_positions < 0) return Status::InvalidArgument("truncate: negative position " + std::to_string(n_positions));
  I.pos[seq] = std::min(I.pos[seq], n_positions);
  return Status::OK();
}

std::span<const float> LlamaRunner::pass_logits() const {
  const Impl& I = *impl_;
  if (!I.opt.logits_all) return {};
  return {static_cast<const float*>(I.pass_logits_host.data()), size_t(I.pass_tokens) * I.m.hparams.n_vocab};
}

std::span<const float> LlamaRunner::logits(int seq) const {
  const Impl& I = *impl_;
  LS_CHECK_MSG(seq >= 0 && seq < I.n_seq, "logits: sequence " + std::to_string(seq) + " outside [0, " +
                                              std::to_string(I.n_seq) + ")");
  const size_t V = I.m.hparams.n_vocab;
  return {static_cast<const float*>(I.logits_host.data()) + seq * V, V};
}

Result<int32_t> LlamaRunner::sample(int seq, const SampleOptions& so, uint64_t seed) {
  Impl& I = *impl_;
  if (seq < 0 || seq >= I.n_seq) return Status::InvalidArgument("sample: sequence " + std::to_string(seq) + " out of range");
  if (I.dev.info().backend == BackendKind::kHost) {
    // The host copy of the logits is current once decode/prefill returned:
    // sample on this thread rather than through the stream (two thread
    // hand-offs per token, each a wake-up that a loaded machine delays).
    return kernels::cpu::sample(logits(seq).data(), I.m.hparams.n_vocab, so.temperature, so.top_k, so.top_p, seed);
  }
  kernels::SampleParams p;
  p.logits = I.f(I.lay.seq_logits) + int64_t(seq) * I.m.hparams.n_vocab;
  p.n_vocab = I.m.hparams.n_vocab;
  p.temperature = so.temperature;
  p.top_k = so.top_k;
  p.top_p = so.top_p;
  p.seed = seed;
  p.out_token = &I.sampled;
  Stream& s = I.exec->compute_stream();
  LS_RETURN_IF_ERROR(I.k->sample(p, s));
  LS_RETURN_IF_ERROR(s.synchronize());
  return I.sampled;
}

int LlamaRunner::position(int seq) const {
  LS_CHECK_MSG(seq >= 0 && seq < impl_->n_seq, "position: sequence " + std::to_string(seq) + " outside [0, " +
                                                   std::to_string(impl_->n_seq) + ")");
  return impl_->pos[seq];
}
Status LlamaRunner::reset(int seq) { return truncate(seq, 0); }
void LlamaRunner::reset_all() { std::fill(impl_->pos.begin(), impl_->pos.end(), 0); }

Status LlamaRunner::bench_prefill(int n_tokens) {
  Impl& I = *impl_;
  if (n_tokens < 1 || n_tokens > I.t_max || n_tokens > I.n_ctx)
    return Status::InvalidArgument("bench_prefill: " + std::to_string(n_tokens) + " tokens outside [1, " +
                                   std::to_string(std::min(I.t_max, I.n_ctx)) + "] (prefill chunk / context)");
  std::vector<int32_t> toks(n_tokens);
  for (int i = 0; i < n_tokens; ++i) toks[i] = static_cast<int32_t>((i * 7919u + 1) % I.m.hparams.n_vocab);
  I.pos[0] = 0;
  return I.run_segments({{0, 0, n_tokens, 0}}, {toks.data()});
}

Status LlamaRunner::bench_decode(int batch, int at_pos) {
  Impl& I = *impl_;
  if (batch < 1 || batch > I.n_seq)
    return Status::InvalidArgument("bench_decode: batch " + std::to_string(batch) + " outside [1, " +
                                   std::to_string(I.n_seq) + "] (n_seq)");
  if (at_pos >= I.n_ctx)
    return Status::InvalidArgument("bench_decode: position " + std::to_string(at_pos) +
                                   " is not below the context length " + std::to_string(I.n_ctx));
  std::vector<int> seqs(batch);
  std::vector<int32_t> toks(batch);
  for (int i = 0; i < batch; ++i) {
    seqs[i] = i;
    if (at_pos >= 0) I.pos[i] = at_pos;
    if (I.pos[i] >= I.n_ctx) I.pos[i] = 0;
    toks[i] = static_cast<int32_t>((I.pos[i] * 31u + i + 1) % I.m.hparams.n_vocab);
  }
  return decode(seqs, toks);
}

const LlamaModel& LlamaRunner::model() const { return impl_->m; }
const RunnerOptions& LlamaRunner::options() const { return impl_->opt; }
int LlamaRunner::n_ctx() const { return impl_->n_ctx; }
int LlamaRunner::n_seq() const { return impl_->n_seq; }
int LlamaRunner::max_pass_tokens() const { return impl_->t_max; }
ReserveSize LlamaRunner::reserve() const { return {impl_->lay.kv_bytes, impl_->lay.total - impl_->lay.kv_bytes}; }
sched::Executor& LlamaRunner::executor() { return *impl_->exec; }
const sched::Plan& LlamaRunner::plan() const { return impl_->exec->plan(); }
const sched::PassSummary& LlamaRunner::last_summary() const { return impl_->exec->last_pass().summary; }
sched::TraceRecorder& LlamaRunner::trace() { return impl_->exec->trace(); }
uint64_t LlamaRunner::streamed_bytes_per_pass() const {
  const sched::Plan& p = impl_->exec->plan();
  const auto& b = impl_->exec->layer_bytes();
  return p.bytes_in(Tier::kRam, b) + p.bytes_in(Tier::kDisk, b);
}

}  // namespace layerstream::llama

namespace layerstream::llama {

// Hybrid execution: host-site blocks compute with the CPU kernels on a host
// mirror of the reserve layout (activations, their KV caches, rope_freqs).
// The executor calls the crossing hooks around a run of host-site layers
// (only x and the positions cross) and move_kv when a plan changes a block's
// site, so its KV cache follows it.
Status LlamaRunner::Impl::init_host_site(sched::ExecutorOptions& eo) {
  kernels::KernelsOptions ko;  // the runner's CPU kernel options (threads, exact) for the host site too
  ko.host_threads = opt.host_threads;
  ko.exact = opt.exact;
  LS_ASSIGN_OR_RETURN(hk, kernels::make_kernels(BackendKind::kHost, ko));
  LS_ASSIGN_OR_RETURN(host_res, dev.alloc_pinned(lay.total));
  std::memset(host_res.data(), 0, host_res.size());
  kv_site.assign(m.hparams.n_layers, sched::Site::kDevice);
  Impl* ip = this;
  eo.activations_to_host = [ip](Stream& s, int) -> Status {
    const uint64_t x_bytes = uint64_t(ip->pass_tokens) * ip->m.hparams.n_embd * sizeof(float);
    LS_RETURN_IF_ERROR(s.copy_d2h(ip->host_base() + ip->lay.x, ip->base() + ip->lay.x, x_bytes));
    return s.copy_d2h(ip->host_base() + ip->lay.positions, ip->base() + ip->lay.positions,
                      uint64_t(ip->pass_tokens) * sizeof(int32_t));
  };
  eo.activations_to_device = [ip](Stream& s, int) -> Status {
    const uint64_t x_bytes = uint64_t(ip->pass_tokens) * ip->m.hparams.n_embd * sizeof(float);
    return s.copy_h2d(ip->base() + ip->lay.x, ip->host_base() + ip->lay.x, x_bytes);
  };
  eo.on_plan_change = [ip](const sched::Plan& from, const sched::Plan& to) { return ip->move_kv(from, to); };
  return Status::OK();
}

// Called with nothing in flight. Block b is executor layer b (the layers are
// the blocks in order, then the head).
Status LlamaRunner::Impl::move_kv(const sched::Plan& from, const sched::Plan& to) {
  // A block's KV cache is where its attention runs: on the host for a
  // host-site block, on the device otherwise (a split block's attention is
  // on the device).
  auto kv_at = [&](size_t b) {
    return to.site(static_cast<int>(b)) == sched::Site::kHost ? sched::Site::kHost : sched::Site::kDevice;
  };
  if (!exec) {  // the first plan: no KV yet
    for (size_t b = 0; b < kv_site.size(); ++b) kv_site[b] = kv_at(b);
    return Status::OK();
  }
  (void)from;
  Stream& s = exec->compute_stream();  // nothing in flight (apply_plan drained)
  for (size_t b = 0; b < kv_site.size(); ++b) {
    const sched::Site want = kv_at(b);
    if (want == kv_site[b]) continue;
    for (int seq = 0; seq < n_seq; ++seq)
      for (int which = 0; which < 2; ++which) {
        void* d = kv_plane_at(base(), seq, static_cast<int>(b), which);
        void* h = kv_plane_at(host_base(), seq, static_cast<int>(b), which);
        LS_RETURN_IF_ERROR(want == sched::Site::kHost ? s.copy_d2h(h, d, lay.kv_plane) : s.copy_h2d(d, h, lay.kv_plane));
      }
    kv_site[b] = want;
  }
  return s.synchronize();
}

// Split blocks. Every matmul of a split block divides its output rows: the
// device computes rows [0, r) from the window region (the executor copied
// only those rows of each weight), the host lane rows [r, n) from the
// layer's RAM copy, at the same time; the halves join in the host mirror
// and the whole output goes back to the device, where the rest of the block
// (norms, RoPE, attention with its KV cache, activations) runs as usual.
// Matmuls that share an input (Q/K/V, gate/up) join once: four joins per
// block. Each join waits on this thread for the host lane (LayerRun's
// contract).
// Per-row arithmetic does not change with the row range (the same kernels,
// rows computed independently), so a split block computes what the block
// computes on either site.
std::vector<sched::SplitTensor> LlamaRunner::Impl::split_tensors(int b, int layer) const {
  const LlamaBlock& w = m.blocks[b];
  std::vector<sched::SplitTensor> v;
  for (const GgufTensorInfo* t : w.matrices()) {
    const int64_t rows = static_cast<int64_t>(t->dims.size() > 1 ? t->dims[1] : 1);
    v.push_back({t->offset - span_begin[layer], t->n_bytes, rows});
  }
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& c) { return a.offset < c.offset; });
  return v;
}

Status LlamaRunner::Impl::init_split() {
  const LlamaHparams& h = m.hparams;
  // The widest group of matmuls sharing an input: Q+K+V, gate+up, O, down.
  const uint64_t nq = uint64_t(h.n_head) * h.head_dim, nkv = uint64_t(h.n_head_kv) * h.head_dim;
  const uint64_t widest = std::max<uint64_t>({nq + 2 * nkv, 2 * uint64_t(h.n_ff), uint64_t(h.n_embd)});
  LS_ASSIGN_OR_RETURN(split_tmp, dev.alloc_pinned(uint64_t(t_max) * widest * sizeof(float)));
  LS_ASSIGN_OR_RETURN(split_x_ev, dev.create_event());
  LS_ASSIGN_OR_RETURN(split_y_ev, dev.create_event());
  return Status::OK();
}

// One join for a group of matmuls sharing the input x [T][n_in] (Q/K/V,
// gate/up, or one): x crosses to the host once, each matmul's halves run at
// the same time on both sides, and the outputs cross back once joined.
Status LlamaRunner::Impl::split_matmuls(const LayerRun& run, Stream& s, const float* x, int T,
                                        std::initializer_list<SplitOut> outs) {
  if (!run.host_lane || !run.host_data) return Status::Internal("split layer run without its host lane or bytes");
  Stream& H = *run.host_lane;
  auto host_of = [&](const void* d) { return host_base() + (static_cast<const char*>(d) - base()); };
  const int64_t n_in = static_cast<int64_t>(outs.begin()->t->dims[0]);
  float* xh = reinterpret_cast<float*>(host_of(x));  // the activations live at the same offsets in the host mirror
  LS_RETURN_IF_ERROR(s.copy_d2h(xh, x, uint64_t(T) * n_in * sizeof(float)));
  LS_RETURN_IF_ERROR(s.record(*split_x_ev));
  Event* x_ev = split_x_ev.get();
  LS_RETURN_IF_ERROR(H.host_func([x_ev] { return x_ev->synchronize(); }));
  // The halves' times for the executor's cost model (LayerRun::split_timing):
  // the host lane's busy time on its rows, the device's from x's arrival to
  // its rows' arrival (events), and the join. The host funcs run before the
  // H.synchronize() below, so they may write this frame's clock.
  using Clock = std::chrono::steady_clock;
  struct JoinClock {
    Clock::time_point h0;
    double host_s = 0, device_s = 0, join_s = 0;
  } clk;
  JoinClock* cp = &clk;
  if (run.split_timing) LS_RETURN_IF_ERROR(H.host_func([cp] {
    cp->h0 = Clock::now();
    return Status::OK();
  }));
  struct Join {
    float* yh;      // the whole output in the host mirror [T][n]
    float* dpart;   // the device half, copied back [T][r]
    float* hpart;   // the host half [T][n - r]
    int64_t n, r;
  };
  std::vector<Join> joins;
  float* tmp = static_cast<float*>(split_tmp.data());
  for (const SplitOut& o : outs) {
    const GgufTensorInfo& t = *o.t;
    const int64_t n = static_cast<int64_t>(t.dims.size() > 1 ? t.dims[1] : 1);
    const int64_t r = sched::split_rows(n, run.device_rows);
    Join j{reinterpret_cast<float*>(host_of(o.y)), tmp, tmp + int64_t{T} * r, n, r};
    tmp += int64_t{T} * n;
    // Host half: rows [r, n) of the weight in the layer's host bytes.
    kernels::MatmulParams hp;
    hp.w = static_cast<const char*>(run.host_data) + (t.offset - span_begin[run.layer]) +
           uint64_t(r) * (t.n_bytes / static_cast<uint64_t>(n));
    hp.w_type = t.type;
    hp.n_in = n_in;
    hp.n_out = n - r;
    hp.x = xh;
    hp.y = j.hpart;
    hp.n_tokens = T;
    if (lay.scratch_bytes) {
      hp.scratch = host_base() + lay.scratch;
      hp.scratch_bytes = lay.scratch_bytes;
    }
    if (n > r) LS_RETURN_IF_ERROR(hk->matmul(hp, H));
    // Device half, at the same time: rows [0, r) into y as [T][r], then to the host.
    if (r > 0) {
      kernels::MatmulParams dp = hp;
      dp.w = tensor(run, run.layer, t);
      dp.n_out = r;
      dp.x = x;
      dp.y = o.y;
      dp.scratch = lay.scratch_bytes ? base() + lay.scratch : nullptr;
      LS_RETURN_IF_ERROR(k->matmul(dp, s));
      LS_RETURN_IF_ERROR(s.copy_d2h(j.dpart, o.y, uint64_t(T) * r * sizeof(float)));
    }
    joins.push_back(j);
  }
  if (run.split_timing) LS_RETURN_IF_ERROR(H.host_func([cp] {
    cp->host_s = std::chrono::duration<double>(Clock::now() - cp->h0).count();
    return Status::OK();
  }));
  LS_RETURN_IF_ERROR(s.record(*split_y_ev));
  Event* y_ev = split_y_ev.get();
  const bool timed = run.split_timing != nullptr;
  LS_RETURN_IF_ERROR(H.host_func([y_ev, x_ev, joins, T, cp, timed] {
    LS_RETURN_IF_ERROR(y_ev->synchronize());
    const Clock::time_point j0 = Clock::now();
    if (timed) {
      LS_ASSIGN_OR_RETURN(const double ms, y_ev->elapsed_ms_since(*x_ev));
      cp->device_s = std::max(0.0, ms) * 1e-3;
    }
    for (const Join& j : joins)
      for (int tok = 0; tok < T; ++tok) {
        std::memcpy(j.yh + tok * j.n, j.dpart + tok * j.r, uint64_t(j.r) * sizeof(float));
        std::memcpy(j.yh + tok * j.n + j.r, j.hpart + tok * (j.n - j.r), uint64_t(j.n - j.r) * sizeof(float));
      }
    cp->join_s = std::chrono::duration<double>(Clock::now() - j0).count();
    return Status::OK();
  }));
  LS_RETURN_IF_ERROR(H.synchronize());  // the join
  if (run.split_timing) {
    // Both halves start when x arrives; the device waits for the longer
    // host half and then for the join before its next work.
    run.split_timing->host_s += clk.host_s;
    run.split_timing->device_idle_s += std::max(0.0, clk.host_s - clk.device_s) + clk.join_s;
  }
  for (const SplitOut& o : outs) {
    const int64_t n = static_cast<int64_t>(o.t->dims.size() > 1 ? o.t->dims[1] : 1);
    LS_RETURN_IF_ERROR(s.copy_h2d(o.y, host_of(o.y), uint64_t(T) * n * sizeof(float)));
  }
  return Status::OK();
}

}  // namespace layerstream::llama

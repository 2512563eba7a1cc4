#include "runtime/llama/llama_runner.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "kernels/kernels.h"
#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/model/gguf_file.h"
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
  }
  return "?";
}

Result<Strategy> parse_strategy(std::string_view name) {
  for (Strategy s : {Strategy::kResident, Strategy::kSerial, Strategy::kOverlap, Strategy::kPlanned})
    if (strategy_name(s) == name) return s;
  return Status::InvalidArgument("unknown strategy '" + std::string(name) +
                                 "' (choices: resident, serial, overlap, planned)");
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
      sched::PlannerInput in;
      for (const LayerSpec& l : layers) {
        in.bytes.push_back(l.bytes);
        in.spans.push_back(sched::slot_span(l));
        in.from_file.push_back(l.from_file());
        in.pins.push_back(l.pin);
      }
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
  uint64_t hrows = 0, hlogits = 0, seq_logits = 0, out_norm = 0, tokens = 0, positions = 0;
  uint64_t scratch = 0, scratch_bytes = 0;
  uint64_t kv_bytes = 0, total = 0;
};

struct Segment {
  int seq = 0;
  int start_pos = 0;
  int n = 0;
  int row = 0;  // first row in the pass's activations
};

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
  std::vector<float> out_norm_host;  // tied head: output_norm weights
  int32_t sampled = 0;
  // The pass being run.
  std::vector<Segment> segs;
  int pass_tokens = 0;

  explicit Impl(Device& d) : dev(d) {}

  char* base() const { return static_cast<char*>(exec->reserved().ptr); }
  float* f(uint64_t off) const { return reinterpret_cast<float*>(base() + off); }
  void* kv_plane(int seq, int layer, int which) const {
    const uint64_t idx = (static_cast<uint64_t>(seq) * m.hparams.n_layers + layer) * 2 + which;
    return base() + lay.kv + idx * lay.kv_plane;
  }
  const void* tensor(const LayerRun& run, int layer, const GgufTensorInfo& t) const {
    return static_cast<const char*>(run.data) + (t.offset - span_begin[layer]);
  }

  Status embed(const LayerRun& run, Stream& s);
  Status block(const LayerRun& run, Stream& s, int b);
  Status head(const LayerRun& run, Stream& s);
  Status run_segments(std::vector<Segment> segs, const std::vector<const int32_t*>& toks);
  Status matmul(Stream& s, const void* w, const GgufTensorInfo& t, const float* x, float* y, int n_tokens);
};

Status LlamaRunner::Impl::matmul(Stream& s, const void* w, const GgufTensorInfo& t, const float* x, float* y,
                                 int n_tokens) {
  kernels::MatmulParams p;
  p.w = w;
  p.w_type = t.type;
  p.n_in = static_cast<int64_t>(t.dims[0]);
  p.n_out = static_cast<int64_t>(t.dims.size() > 1 ? t.dims[1] : 1);
  p.x = x;
  p.y = y;
  p.n_tokens = n_tokens;
  if (lay.scratch_bytes) {
    p.scratch = base() + lay.scratch;
    p.scratch_bytes = lay.scratch_bytes;
  }
  return k->matmul(p, s);
}

Status LlamaRunner::Impl::embed(const LayerRun& run, Stream& s) {
  const int T = pass_tokens;
  LS_RETURN_IF_ERROR(s.copy_h2d(base() + lay.tokens, tokens_host.data(), T * sizeof(int32_t)));
  LS_RETURN_IF_ERROR(s.copy_h2d(base() + lay.positions, pos_host.data(), T * sizeof(int32_t)));
  kernels::EmbeddingParams p;
  p.table = tensor(run, run.layer, m.token_embd);
  p.type = m.token_embd.type;
  p.n_vocab = m.hparams.n_vocab;
  p.n_embd = m.hparams.n_embd;
  p.tokens = reinterpret_cast<const int32_t*>(base() + lay.tokens);
  p.n_tokens = T;
  p.out = f(lay.x);
  return k->embedding(p, s);
}

Status LlamaRunner::Impl::block(const LayerRun& run, Stream& s, int b) {
  const LlamaHparams& h = m.hparams;
  const LlamaBlock& w = m.blocks[b];
  const int T = pass_tokens;
  const int64_t e = h.n_embd, hd = h.head_dim, nq = int64_t{h.n_head} * hd, nkv = int64_t{h.n_head_kv} * hd;
  const int L = run.layer;
  float *x = f(lay.x), *xb = f(lay.xb), *q = f(lay.q), *kk = f(lay.k), *v = f(lay.v), *att = f(lay.att),
        *tmp = f(lay.tmp), *gate = f(lay.gate), *up = f(lay.up);
  const auto* positions = reinterpret_cast<const int32_t*>(base() + lay.positions);

  kernels::RmsNormParams n1{x, static_cast<const float*>(tensor(run, L, w.attn_norm)), xb, T, e, h.rms_eps};
  LS_RETURN_IF_ERROR(k->rmsnorm(n1, s));
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, L, w.attn_q), w.attn_q, xb, q, T));
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, L, w.attn_k), w.attn_k, xb, kk, T));
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, L, w.attn_v), w.attn_v, xb, v, T));
  auto bias = [&](const std::optional<GgufTensorInfo>& bt, float* y, int64_t width) -> Status {
    if (!bt) return Status::OK();
    const auto* bp = static_cast<const float*>(tensor(run, L, *bt));
    for (int t = 0; t < T; ++t) LS_RETURN_IF_ERROR(k->add({y + t * width, bp, y + t * width, width}, s));
    return Status::OK();
  };
  LS_RETURN_IF_ERROR(bias(w.attn_q_bias, q, nq));
  LS_RETURN_IF_ERROR(bias(w.attn_k_bias, kk, nkv));
  LS_RETURN_IF_ERROR(bias(w.attn_v_bias, v, nkv));
  kernels::RopeParams rp;
  rp.n_tokens = T;
  rp.head_dim = hd;
  rp.n_rot = h.n_rot;
  rp.positions = positions;
  rp.freq_base = h.rope_freq_base;
  rp.freq_scale = h.rope_scaling_type == "linear" && h.rope_scaling_factor > 0 ? 1.0f / h.rope_scaling_factor : 1.0f;
  rp.neox = h.rope_neox;
  rp.x = q;
  rp.n_heads = h.n_head;
  LS_RETURN_IF_ERROR(k->rope(rp, s));
  rp.x = kk;
  rp.n_heads = h.n_head_kv;
  LS_RETURN_IF_ERROR(k->rope(rp, s));
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
    ap.out = att + sg.row * nq;
    LS_RETURN_IF_ERROR(k->attention(ap, s));
  }
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, L, w.attn_output), w.attn_output, att, tmp, T));
  LS_RETURN_IF_ERROR(k->add({x, tmp, x, T * e}, s));

  kernels::RmsNormParams n2{x, static_cast<const float*>(tensor(run, L, w.ffn_norm)), xb, T, e, h.rms_eps};
  LS_RETURN_IF_ERROR(k->rmsnorm(n2, s));
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, L, w.ffn_gate), w.ffn_gate, xb, gate, T));
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, L, w.ffn_up), w.ffn_up, xb, up, T));
  LS_RETURN_IF_ERROR(k->silu_mul({gate, up, gate, int64_t{T} * h.n_ff}, s));
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, L, w.ffn_down), w.ffn_down, gate, tmp, T));
  return k->add({x, tmp, x, T * e}, s);
}

Status LlamaRunner::Impl::head(const LayerRun& run, Stream& s) {
  const LlamaHparams& h = m.hparams;
  const int64_t e = h.n_embd, V = h.n_vocab;
  const int S = static_cast<int>(segs.size());
  float *hrows = f(lay.hrows), *hl = f(lay.hlogits);
  for (int i = 0; i < S; ++i) {
    const Segment& sg = segs[i];
    LS_RETURN_IF_ERROR(s.copy_d2d(hrows + i * e, f(lay.x) + int64_t(sg.row + sg.n - 1) * e, e * sizeof(float)));
  }
  const float* norm_w = m.output_tied ? f(lay.out_norm)
                                      : static_cast<const float*>(tensor(run, run.layer, m.output_norm));
  kernels::RmsNormParams np{hrows, norm_w, hrows, S, e, h.rms_eps};
  LS_RETURN_IF_ERROR(k->rmsnorm(np, s));
  LS_RETURN_IF_ERROR(matmul(s, tensor(run, run.layer, m.output), m.output, hrows, hl, S));
  for (int i = 0; i < S; ++i) {
    float* dst = f(lay.seq_logits) + int64_t(segs[i].seq) * V;
    LS_RETURN_IF_ERROR(s.copy_d2d(dst, hl + i * V, V * sizeof(float)));
    LS_RETURN_IF_ERROR(
        s.copy_d2h(static_cast<float*>(logits_host.data()) + int64_t(segs[i].seq) * V, dst, V * sizeof(float)));
  }
  return Status::OK();
}

Status LlamaRunner::Impl::run_segments(std::vector<Segment> sg, const std::vector<const int32_t*>& toks) {
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
  pass_tokens = row;
  Status st = exec->run_pass(row);
  for (const Segment& s : segs)
    if (st.ok()) pos[s.seq] = s.start_pos + s.n;
  return st;
}

LlamaRunner::LlamaRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaRunner::~LlamaRunner() = default;

Result<std::unique_ptr<LlamaRunner>> LlamaRunner::create(Device& device, const std::string& path,
                                                         RunnerOptions o) {
  auto impl = std::make_unique<Impl>(device);
  Impl& I = *impl;
  {
    auto f = read_gguf_file(path);
    if (!f.ok()) return f.status();
    I.file = std::move(*f);
  }
  {
    auto mm = load_llama_model(I.file);
    if (!mm.ok()) return mm.status().WithContext(path);
    I.m = std::move(*mm);
  }
  const LlamaHparams& h = I.m.hparams;
  if (o.kv_type != GgmlType::F32 && o.kv_type != GgmlType::F16)
    return Status::InvalidArgument("KV cache type must be f32 or f16, got " + ggml_type_name(uint32_t(o.kv_type)));
  if (o.n_seq < 1) return Status::InvalidArgument("number of sequences must be >= 1, got " + std::to_string(o.n_seq));
  if (o.prefill_chunk < 1)
    return Status::InvalidArgument("prefill chunk must be >= 1, got " + std::to_string(o.prefill_chunk));
  if (o.n_ctx < 0) return Status::InvalidArgument("context length must be >= 0, got " + std::to_string(o.n_ctx));
  const int model_ctx = h.n_ctx_train ? static_cast<int>(std::min<uint32_t>(h.n_ctx_train, 1u << 30)) : 2048;
  I.n_ctx = o.n_ctx ? o.n_ctx : std::min(model_ctx, 2048);
  I.n_seq = o.n_seq;
  I.t_max = std::max(std::min<int64_t>(o.prefill_chunk, int64_t{I.n_ctx} * I.n_seq), int64_t{I.n_seq});
  I.pos.assign(I.n_seq, 0);

  const DeviceInfo& info = device.info();
  {
    kernels::KernelsOptions ko;
    ko.host_threads = o.host_threads;
    ko.exact = o.exact;
    auto kk = kernels::make_kernels(info.backend, ko);
    if (!kk.ok()) return kk.status();
    I.k = std::move(*kk);
  }

  // Reserve layout.
  Layout& L = I.lay;
  const uint64_t T = I.t_max, S = I.n_seq, e = h.n_embd, hd = h.head_dim;
  const uint64_t nq = uint64_t{h.n_head} * hd, nkv = uint64_t{h.n_head_kv} * hd;
  const uint64_t kv_elt = o.kv_type == GgmlType::F16 ? 2 : 4;
  L.kv_plane = sched::round_up(uint64_t(I.n_ctx) * nkv * kv_elt, kAlign);
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
  L.hrows = take(S * e * 4);
  L.hlogits = take(S * uint64_t{h.n_vocab} * 4);
  L.seq_logits = take(S * uint64_t{h.n_vocab} * 4);
  L.out_norm = take(e * 4);
  L.tokens = take(T * 4);
  L.positions = take(T * 4);
  uint64_t scratch = 0;
  auto need = [&](const GgufTensorInfo& t, int64_t n_tok) {
    scratch = std::max(scratch, I.k->matmul_scratch_bytes(t.type, t.dims.size() > 1 ? t.dims[1] : 1, t.dims[0], n_tok));
  };
  for (const LlamaBlock& b : I.m.blocks)
    for (const GgufTensorInfo* t : {&b.attn_q, &b.attn_k, &b.attn_v, &b.attn_output, &b.ffn_gate, &b.ffn_up, &b.ffn_down})
      need(*t, T);
  need(I.m.output, S);
  L.scratch_bytes = scratch;
  L.scratch = scratch ? take(scratch) : off;
  L.total = off;

  // Layers: embedding, blocks, head.
  std::vector<LayerSpec> layers;
  Impl* ip = &I;
  for (size_t li = 0; li < I.m.layers.size(); ++li) {
    const ModelLayer& ml = I.m.layers[li];
    LayerSpec spec;
    spec.name = ml.name;
    spec.file = path;
    if (ml.kind == LayerKind::kHead && I.m.output_tied) {
      // Stream token_embd's span; output_norm lives in the reserve.
      spec.file_offset = I.m.token_embd.offset;
      spec.bytes = I.m.token_embd.n_bytes;
    } else {
      spec.file_offset = ml.span_begin;
      spec.bytes = ml.span_bytes();
    }
    I.span_begin.push_back(spec.file_offset);
    if (li < o.pins.size()) spec.pin = o.pins[li];
    if (o.strategy == Strategy::kResident && !spec.pin) spec.pin = Tier::kResident;
    switch (ml.kind) {
      case LayerKind::kEmbedding:
        spec.compute = [ip](const LayerRun& r, Stream& s) { return ip->embed(r, s); };
        break;
      case LayerKind::kBlock: {
        const int b = ml.block;
        spec.compute = [ip, b](const LayerRun& r, Stream& s) { return ip->block(r, s, b); };
        break;
      }
      case LayerKind::kHead:
        spec.compute = [ip](const LayerRun& r, Stream& s) { return ip->head(r, s); };
        break;
    }
    layers.push_back(std::move(spec));
  }
  if (!o.pins.empty() && o.pins.size() != layers.size())
    return Status::InvalidArgument("pins has " + std::to_string(o.pins.size()) + " entries, the model has " +
                                   std::to_string(layers.size()) + " layers");

  // Default VRAM budget and the window + reserve check, before any allocation.
  uint64_t largest = 0, all_layers = 0;
  for (const LayerSpec& l : layers) {
    largest = std::max(largest, sched::slot_span(l));
    all_layers += sched::round_up(l.bytes, sched::kSlotAlignment);
  }
  if (o.vram_budget == 0) {
    const uint64_t want = L.total + all_layers + (64ull << 20);
    const uint64_t avail = info.free_memory_bytes / 10 * 9;
    o.vram_budget = info.backend == BackendKind::kHost ? std::min(want, avail) : avail;
    LS_LOG_INFO("llama: no VRAM budget given; using {} ({} free on {})", format_bytes(o.vram_budget),
                format_bytes(info.free_memory_bytes), info.name);
  }
  if (o.vram_budget < L.total + largest)
    return Status::OutOfBudget("vram budget " + format_bytes(o.vram_budget) + " (" + std::to_string(o.vram_budget) +
                               " bytes) cannot hold one window (largest layer " + format_bytes(largest) +
                               ") plus KV cache and activations (" + format_bytes(L.total) + ", KV " +
                               format_bytes(L.kv_bytes) + " for " + std::to_string(I.n_ctx) + " positions x " +
                               std::to_string(I.n_seq) + " sequences): need at least " +
                               std::to_string(L.total + largest) + " bytes");
  I.opt = o;

  // Host buffers.
  LS_ASSIGN_OR_RETURN(I.tokens_host, device.alloc_pinned(T * 4));
  LS_ASSIGN_OR_RETURN(I.pos_host, device.alloc_pinned(T * 4));
  LS_ASSIGN_OR_RETURN(I.logits_host, device.alloc_pinned(S * h.n_vocab * 4));
  std::memset(I.logits_host.data(), 0, I.logits_host.size());

  LS_ASSIGN_OR_RETURN(sched::ExecutorOptions eo, executor_options_for(o, layers, info, L.total));
  {
    auto ex = sched::Executor::create(device, std::move(layers), std::move(eo));
    if (!ex.ok()) return ex.status().WithContext(path);
    I.exec = std::move(*ex);
  }
  if (I.m.output_tied) {
    // Read output_norm once into the reserve.
    const GgufTensorInfo& t = I.m.output_norm;
    I.out_norm_host.resize(t.n_bytes / 4);
    FILE* fp = std::fopen(path.c_str(), "rb");
    if (!fp) return Status::FromErrno("open " + path, errno);
    bool ok = std::fseek(fp, static_cast<long>(t.offset), SEEK_SET) == 0 &&
              std::fread(I.out_norm_host.data(), 1, t.n_bytes, fp) == t.n_bytes;
    std::fclose(fp);
    if (!ok) return Status::IOError(path + ": short read of output_norm.weight at offset " + std::to_string(t.offset));
    Stream& s = I.exec->compute_stream();
    LS_RETURN_IF_ERROR(s.copy_h2d(I.f(L.out_norm), I.out_norm_host.data(), t.n_bytes));
    LS_RETURN_IF_ERROR(s.synchronize());
  }
  LS_LOG_INFO("llama: {} layers, ctx {} x {} seq, reserve {} (KV {}), plan: {}", I.m.layers.size(), I.n_ctx,
              I.n_seq, format_bytes(L.total), format_bytes(L.kv_bytes),
              sched::describe_plan(I.exec->plan(), I.exec->layer_bytes()));
  return std::unique_ptr<LlamaRunner>(new LlamaRunner(std::move(impl)));
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

std::span<const float> LlamaRunner::logits(int seq) const {
  const Impl& I = *impl_;
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

int LlamaRunner::position(int seq) const { return impl_->pos.at(seq); }
void LlamaRunner::reset(int seq) { impl_->pos.at(seq) = 0; }
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

// One block's forward pass, driven by the model's ArchTraits and hparams:
// x += attention(norm(x)); x += ffn(norm(x)). The block's site decides where
// the activations, the KV cache and the kernels are (a host-site block runs
// the CPU kernels on the host mirror of the reserve, whatever the backend).
// Shapes: x, xb, tmp [T][n_embd]; q, att [T][n_head * head_dim]; k, v
// [T][n_head_kv * head_dim]; gate, up [T][n_ff] (float, T = the pass's tokens).
#include "runtime/llama/runner_impl.h"

#include "runtime/core/status_macros.h"

namespace layerstream::llama {

using sched::LayerRun;

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

Status LlamaRunner::Impl::observe_inputs(const LayerRun& run, Stream& s, const float* x, int n_tokens,
                                         std::initializer_list<const GgufTensorInfo*> weights) {
  if (!opt.matmul_inputs) return Status::OK();
  if (run.site != sched::Site::kHost && dev.info().backend != BackendKind::kHost) {
    return Status::Unsupported("matmul inputs can be observed only where they are in host memory: run the blocks "
                               "on the host site (strategy host) or on the host backend");
  }
  std::vector<const GgufTensorInfo*> group(weights);
  const auto* observe = &opt.matmul_inputs;
  return s.host_func([observe, group = std::move(group), x, n_tokens] { return (*observe)(group, x, n_tokens); });
}

Status LlamaRunner::Impl::block_matmul(const LayerRun& run, Stream& s, const GgufTensorInfo& t, const float* x,
                                       float* y, int n_tokens) {
  LS_RETURN_IF_ERROR(observe_inputs(run, s, x, n_tokens, {&t}));
  if (run.site == sched::Site::kSplit) return split_matmuls(run, s, x, n_tokens, {{&t, y}});
  const SiteView S = site_view(run.site);
  kernels::MatmulParams p = matmul_params(tensor(run, t), t, x, y, n_tokens, S.base);
  LS_RETURN_IF_ERROR(use_packed(run, S.k, s, t, p));
  return S.k.matmul(p, s);
}

Status LlamaRunner::Impl::block(const Pass& p, const LayerRun& run, Stream& s, int b) {
  LS_RETURN_IF_ERROR(attention(p, run, s, b));
  return ffn(p, run, s, b);
}

// The post-attention / post-FFN norm of traits.post_norms, in place on tmp.
Status LlamaRunner::Impl::post_norm(const Pass& p, const LayerRun& run, Stream& s,
                                    const std::optional<GgufTensorInfo>& nt) {
  if (!nt) return Status::OK();
  const LlamaHparams& h = m.hparams;
  const SiteView S = site_view(run.site);
  float* tmp = S.f(lay.tmp);
  return S.k.rmsnorm(
      {tmp, static_cast<const float*>(tensor(run, *nt)), tmp, p.n_tokens, h.n_embd, h.rms_eps}, s);
}

// x += attention over the pass's segments: norm, Q/K/V, RoPE, each segment
// against its sequence's KV cache, the output projection.
Status LlamaRunner::Impl::attention(const Pass& p, const LayerRun& run, Stream& s, int b) {
  const LlamaHparams& h = m.hparams;
  const LlamaBlock& w = m.blocks[b];
  const int T = p.n_tokens;
  const SiteView S = site_view(run.site);
  kernels::RmsNormParams n1{S.f(lay.x), static_cast<const float*>(tensor(run, w.attn_norm)), S.f(lay.xb), T, h.n_embd,
                            h.rms_eps};
  LS_RETURN_IF_ERROR(S.k.rmsnorm(n1, s));
  LS_RETURN_IF_ERROR(qkv(p, run, s, b));
  LS_RETURN_IF_ERROR(rope_qk(p, run, s, b));
  LS_RETURN_IF_ERROR(attend(p, run, s, b));
  LS_RETURN_IF_ERROR(block_matmul(run, s, w.attn_output, S.f(lay.att), S.f(lay.tmp), T));
  if (w.attn_output_bias) {  // gpt-oss
    const auto* bp = static_cast<const float*>(tensor(run, *w.attn_output_bias));
    float* tmp = S.f(lay.tmp);
    for (int t = 0; t < T; ++t) LS_RETURN_IF_ERROR(S.k.add({tmp + t * h.n_embd, bp, tmp + t * h.n_embd, h.n_embd}, s));
  }
  LS_RETURN_IF_ERROR(post_norm(p, run, s, w.attn_post_norm));
  return S.k.add({S.f(lay.x), S.f(lay.tmp), S.f(lay.x), int64_t{T} * h.n_embd}, s);
}

// q, k, v := xb times Q, K, V (one join on a split site; else one call for
// the three: the CPU kernels quantise xb once and run them as one job), plus
// the optional biases and QK norms.
Status LlamaRunner::Impl::qkv(const Pass& p, const LayerRun& run, Stream& s, int b) {
  const LlamaHparams& h = m.hparams;
  const LlamaBlock& w = m.blocks[b];
  const int T = p.n_tokens;
  const int64_t hd = h.head_dim, nq = int64_t{h.n_head} * hd, nkv = int64_t{h.n_head_kv} * hd;
  const SiteView S = site_view(run.site);
  float *xb = S.f(lay.xb), *q = S.f(lay.q), *kk = S.f(lay.k), *v = S.f(lay.v);
  LS_RETURN_IF_ERROR(observe_inputs(run, s, xb, T, {&w.attn_q, &w.attn_k, &w.attn_v}));
  if (run.site == sched::Site::kSplit) {
    LS_RETURN_IF_ERROR(split_matmuls(run, s, xb, T, {{&w.attn_q, q}, {&w.attn_k, kk}, {&w.attn_v, v}}));
  } else {
    kernels::MatmulParams mm[] = {matmul_params(tensor(run, w.attn_q), w.attn_q, xb, q, T, S.base),
                                  matmul_params(tensor(run, w.attn_k), w.attn_k, xb, kk, T, S.base),
                                  matmul_params(tensor(run, w.attn_v), w.attn_v, xb, v, T, S.base)};
    LS_RETURN_IF_ERROR(use_packed(run, S.k, s, w.attn_q, mm[0]));
    LS_RETURN_IF_ERROR(use_packed(run, S.k, s, w.attn_k, mm[1]));
    LS_RETURN_IF_ERROR(use_packed(run, S.k, s, w.attn_v, mm[2]));
    LS_RETURN_IF_ERROR(S.k.matmuls(mm, 3, s));
  }
  auto bias = [&](const std::optional<GgufTensorInfo>& bt, float* y, int64_t width) -> Status {
    if (!bt) return Status::OK();
    const auto* bp = static_cast<const float*>(tensor(run, *bt));
    for (int t = 0; t < T; ++t) LS_RETURN_IF_ERROR(S.k.add({y + t * width, bp, y + t * width, width}, s));
    return Status::OK();
  };
  LS_RETURN_IF_ERROR(bias(w.attn_q_bias, q, nq));
  LS_RETURN_IF_ERROR(bias(w.attn_k_bias, kk, nkv));
  LS_RETURN_IF_ERROR(bias(w.attn_v_bias, v, nkv));
  if (!w.attn_q_norm) return Status::OK();
  // traits.qk_norm: every head of every token is one row.
  const auto* qn = static_cast<const float*>(tensor(run, *w.attn_q_norm));
  const auto* kn = static_cast<const float*>(tensor(run, *w.attn_k_norm));
  LS_RETURN_IF_ERROR(S.k.rmsnorm({q, qn, q, int64_t{T} * h.n_head, hd, h.rms_eps}, s));
  return S.k.rmsnorm({kk, kn, kk, int64_t{T} * h.n_head_kv, hd, h.rms_eps}, s);
}

// RoPE on q and k at the pass's positions (the block's base: sliding-window
// layers have their own; Llama 3.1's frequency factors from the reserve).
Status LlamaRunner::Impl::rope_qk(const Pass& p, const LayerRun& run, Stream& s, int b) {
  const LlamaHparams& h = m.hparams;
  const SiteView S = site_view(run.site);
  kernels::RopeParams rp;
  rp.n_tokens = p.n_tokens;
  rp.head_dim = h.head_dim;
  rp.n_rot = h.n_rot;
  rp.positions = reinterpret_cast<const int32_t*>(S.base + lay.positions);
  rp.freq_base = h.rope_base(static_cast<uint32_t>(b));
  rp.freq_factors = m.rope_freqs ? S.f(lay.rope_freqs) : nullptr;
  rp.freq_scale = h.rope_scaling_type == "linear" && h.rope_scaling_factor > 0 ? 1.0f / h.rope_scaling_factor : 1.0f;
  rp.neox = h.rope_neox;
  rp.x = S.f(lay.q);
  rp.n_heads = h.n_head;
  LS_RETURN_IF_ERROR(S.k.rope(rp, s));
  rp.x = S.f(lay.k);
  rp.n_heads = h.n_head_kv;
  return S.k.rope(rp, s);
}

// att := each segment's queries against its sequence's KV cache (the new
// keys and values appended to it at the segment's positions).
Status LlamaRunner::Impl::attend(const Pass& p, const LayerRun& run, Stream& s, int b) {
  const LlamaHparams& h = m.hparams;
  const LlamaBlock& w = m.blocks[b];
  const int64_t hd = h.head_dim, nq = int64_t{h.n_head} * hd, nkv = int64_t{h.n_head_kv} * hd;
  const SiteView S = site_view(run.site);
  for (const Segment& sg : p.segs) {
    kernels::AttentionParams ap;
    ap.q = S.f(lay.q) + sg.row * nq;
    ap.k_new = S.f(lay.k) + sg.row * nkv;
    ap.v_new = S.f(lay.v) + sg.row * nkv;
    ap.k_cache = kv_plane_at(S.base, sg.seq, b, 0);
    ap.v_cache = kv_plane_at(S.base, sg.seq, b, 1);
    ap.kv_type = opt.kv_type;
    ap.n_ctx = n_ctx;
    ap.start_pos = sg.start_pos;
    ap.n_tokens = sg.n;
    ap.n_head = h.n_head;
    ap.n_kv_head = h.n_head_kv;
    ap.head_dim = hd;
    ap.scale = h.attn_scale;
    ap.window = h.is_swa(static_cast<uint32_t>(b)) ? h.n_swa : 0;
    ap.sinks = w.attn_sinks ? static_cast<const float*>(tensor(run, *w.attn_sinks)) : nullptr;
    ap.out = S.f(lay.att) + sg.row * nq;
    LS_RETURN_IF_ERROR(S.k.attention(ap, s));
  }
  return Status::OK();
}

// tmp := the mixture of experts of xb (kernels.h: MoeFfnParams). The
// experts are whole in the block's bytes on every site (a split block
// splits only Q, K, V and O), so the site's kernels compute all of it.
Status LlamaRunner::Impl::moe_ffn(const Pass& p, const LayerRun& run, Stream& s, int b) {
  const LlamaHparams& h = m.hparams;
  const MoeTensors& w = *m.blocks[b].moe;
  const SiteView S = site_view(run.site);
  kernels::MoeFfnParams mp;
  mp.x = S.f(lay.xb);
  mp.n_tokens = p.n_tokens;
  mp.n_embd = h.n_embd;
  mp.n_ff = h.n_ff_exp;
  mp.n_expert = h.n_expert;
  mp.n_used = h.n_expert_used;
  mp.router = tensor(run, w.router);
  mp.router_type = w.router.type;
  mp.gate = tensor(run, w.gate_exps);
  mp.gate_type = w.gate_exps.type;
  mp.up = tensor(run, w.up_exps);
  mp.up_type = w.up_exps.type;
  mp.down = tensor(run, w.down_exps);
  mp.down_type = w.down_exps.type;
  mp.act = h.traits.ffn == FfnActivation::kGeluTanh    ? kernels::GatedActivation::kGelu
           : h.traits.ffn == FfnActivation::kSwigluOai ? kernels::GatedActivation::kSwigluOai
                                                        : kernels::GatedActivation::kSilu;
  auto bias = [&](const std::optional<GgufTensorInfo>& t) {
    return t ? static_cast<const float*>(tensor(run, *t)) : nullptr;
  };
  mp.router_bias = bias(w.router_bias);  // gpt-oss's biases
  mp.gate_bias = bias(w.gate_bias);
  mp.up_bias = bias(w.up_bias);
  mp.down_bias = bias(w.down_bias);
  mp.out = S.f(lay.tmp);
  mp.work = S.base + lay.moe_work;
  mp.work_bytes = lay.moe_work_bytes;
  if (lay.scratch_bytes) {
    mp.scratch = S.base + lay.scratch;
    mp.scratch_bytes = lay.scratch_bytes;
  }
  return S.k.moe_ffn(mp, s);
}

// x += ffn_down(act(ffn_gate(norm(x))) * ffn_up(norm(x))), or of the
// block's mixture of experts.
Status LlamaRunner::Impl::ffn(const Pass& p, const LayerRun& run, Stream& s, int b) {
  const LlamaHparams& h = m.hparams;
  const LlamaBlock& w = m.blocks[b];
  const int T = p.n_tokens;
  const SiteView S = site_view(run.site);
  float *x = S.f(lay.x), *xb = S.f(lay.xb), *tmp = S.f(lay.tmp), *gate = S.f(lay.gate), *up = S.f(lay.up);
  kernels::RmsNormParams n2{x, static_cast<const float*>(tensor(run, w.ffn_norm)), xb, T, h.n_embd, h.rms_eps};
  LS_RETURN_IF_ERROR(S.k.rmsnorm(n2, s));
  if (w.moe) {
    LS_RETURN_IF_ERROR(moe_ffn(p, run, s, b));
    LS_RETURN_IF_ERROR(post_norm(p, run, s, w.ffn_post_norm));
    return S.k.add({x, tmp, x, int64_t{T} * h.n_embd}, s);
  }
  LS_RETURN_IF_ERROR(observe_inputs(run, s, xb, T, {&w.ffn_gate, &w.ffn_up}));
  if (run.site == sched::Site::kSplit) {  // one join for both
    LS_RETURN_IF_ERROR(split_matmuls(run, s, xb, T, {{&w.ffn_gate, gate}, {&w.ffn_up, up}}));
  } else {
    kernels::MatmulParams gate_up[] = {matmul_params(tensor(run, w.ffn_gate), w.ffn_gate, xb, gate, T, S.base),
                                       matmul_params(tensor(run, w.ffn_up), w.ffn_up, xb, up, T, S.base)};
    LS_RETURN_IF_ERROR(use_packed(run, S.k, s, w.ffn_gate, gate_up[0]));
    LS_RETURN_IF_ERROR(use_packed(run, S.k, s, w.ffn_up, gate_up[1]));
    LS_RETURN_IF_ERROR(S.k.matmuls(gate_up, 2, s));
  }
  const int64_t n_ff = int64_t{T} * h.n_ff;
  if (h.traits.ffn == FfnActivation::kGeluTanh) {
    LS_RETURN_IF_ERROR(S.k.gelu_mul({gate, up, gate, n_ff}, s));
  } else {
    LS_RETURN_IF_ERROR(S.k.silu_mul({gate, up, gate, n_ff}, s));
  }
  LS_RETURN_IF_ERROR(block_matmul(run, s, w.ffn_down, gate, tmp, T));
  LS_RETURN_IF_ERROR(post_norm(p, run, s, w.ffn_post_norm));
  return S.k.add({x, tmp, x, int64_t{T} * h.n_embd}, s);
}

}  // namespace layerstream::llama

#include "runtime/model/llama_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "runtime/core/status_macros.h"

namespace layerstream {

const ArchTraits* arch_traits(const std::string& arch) {
  static const ArchTraits kLlama{};
  static const ArchTraits kQwen2{.rope_neox = true};
  static const ArchTraits kQwen3{.rope_neox = true, .qk_norm = true};
  static const ArchTraits kGemma3{.rope_neox = true,
                                  .qk_norm = true,
                                  .post_norms = true,
                                  .embed_scale = true,
                                  .ffn = FfnActivation::kGeluTanh,
                                  .sliding_window = true,
                                  .swa_pattern = 6};
  if (arch == "llama" || arch == "mistral") return &kLlama;
  if (arch == "qwen2") return &kQwen2;
  if (arch == "qwen3" || arch == "qwen3moe") return &kQwen3;
  static const ArchTraits kGptOss{.rope_neox = true,
                                  .ffn = FfnActivation::kSwigluOai,
                                  .sliding_window = true,
                                  .swa_pattern = 2,
                                  .gpt_oss = true};
  if (arch == "gemma3") return &kGemma3;
  if (arch == "gpt-oss") return &kGptOss;
  return nullptr;
}

bool is_llama_family(const std::string& arch) { return arch_traits(arch) != nullptr; }

ExpertSlice expert_slice(const GgufTensorInfo& t, uint32_t e) {
  const uint64_t n_expert = t.dims.size() > 2 ? t.dims[2] : 1;
  const uint64_t bytes = t.n_bytes / n_expert;  // the loader checked the shape: a whole number of rows each
  return {t.offset + e * bytes, bytes};
}

namespace {

// llama.cpp's LLAMA_MAX_EXPERTS.
constexpr uint32_t kMaxExperts = 512;

class LlamaLoader {
 public:
  explicit LlamaLoader(const GgufFile& f) : f_(f) {}

  Result<LlamaModel> load() {
    LS_RETURN_IF_ERROR(read_hparams());
    LS_RETURN_IF_ERROR(read_tensors());
    build_layers();
    return std::move(m_);
  }

 private:
  std::string key(const char* suffix) const { return m_.hparams.arch + "." + suffix; }

  Status bad_hparam(const std::string& what, uint64_t value, const std::string& rule) const {
    return Status::Corruption(fmt::format("{}: hyper-parameter {} = {} {}", f_.path(), what, value, rule));
  }

  Status read_hparams() {
    LlamaHparams& h = m_.hparams;
    LS_ASSIGN_OR_RETURN(h.arch, f_.get_string("general.architecture"));
    if (!is_llama_family(h.arch)) {
      return Status::Unsupported(fmt::format(
          "{}: architecture '{}' is not supported (supported: llama, mistral, qwen2, qwen3, qwen3moe, gemma3, gpt-oss)", f_.path(), h.arch));
    }
    h.traits = *arch_traits(h.arch);
    h.rope_neox = h.traits.rope_neox;
    LS_ASSIGN_OR_RETURN(h.n_layers, f_.get_u32(key("block_count")));
    LS_ASSIGN_OR_RETURN(h.n_embd, f_.get_u32(key("embedding_length")));
    LS_ASSIGN_OR_RETURN(h.n_ff, f_.get_u32(key("feed_forward_length")));
    LS_ASSIGN_OR_RETURN(h.n_head, f_.get_u32(key("attention.head_count")));
    LS_ASSIGN_OR_RETURN(h.n_head_kv, f_.get_u32_or(key("attention.head_count_kv"), h.n_head));
    LS_ASSIGN_OR_RETURN(h.n_ctx_train, f_.get_u32(key("context_length")));
    LS_ASSIGN_OR_RETURN(double eps, f_.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-5));
    LS_ASSIGN_OR_RETURN(double base, f_.get_float_or(key("rope.freq_base"), 10000.0));
    const std::string block_count = key("block_count");
    if (h.n_layers == 0) return bad_hparam(key("block_count"), 0, "must be > 0");
    if (h.n_layers > 65536) return bad_hparam(key("block_count"), h.n_layers, "exceeds the limit 65536");
    if (h.n_embd == 0) return bad_hparam(key("embedding_length"), 0, "must be > 0");
    if (h.n_ff == 0) return bad_hparam(key("feed_forward_length"), 0, "must be > 0");
    if (h.n_head == 0) return bad_hparam(key("attention.head_count"), 0, "must be > 0");
    if (h.n_head_kv == 0) return bad_hparam(key("attention.head_count_kv"), 0, "must be > 0");
    if (h.n_ctx_train == 0) return bad_hparam(key("context_length"), 0, "must be > 0");
    if (h.n_embd % h.n_head != 0) {
      return bad_hparam(key("attention.head_count"), h.n_head,
                        fmt::format("does not divide embedding_length {}", h.n_embd));
    }
    if (h.n_head % h.n_head_kv != 0) {
      return bad_hparam(key("attention.head_count_kv"), h.n_head_kv,
                        fmt::format("does not divide head_count {}", h.n_head));
    }
    LS_ASSIGN_OR_RETURN(h.head_dim, f_.get_u32_or(key("attention.key_length"), h.n_embd / h.n_head));
    LS_ASSIGN_OR_RETURN(uint32_t vlen, f_.get_u32_or(key("attention.value_length"), h.head_dim));
    if (h.head_dim == 0 || h.head_dim % 2 != 0 || vlen != h.head_dim) {
      return bad_hparam(key("attention.key_length"), h.head_dim,
                        fmt::format("must be even, > 0 and equal to value_length {}", vlen));
    }
    LS_ASSIGN_OR_RETURN(h.n_rot, f_.get_u32_or(key("rope.dimension_count"), h.head_dim));
    if (h.n_rot == 0 || h.n_rot % 2 != 0 || h.n_rot > h.head_dim) {
      return bad_hparam(key("rope.dimension_count"), h.n_rot,
                        fmt::format("must be even and in 2..head_dim ({})", h.head_dim));
    }
    if (!(eps > 0 && eps < 1)) {
      return Status::Corruption(fmt::format("{}: hyper-parameter {} = {} must be in (0, 1)", f_.path(),
                                            key("attention.layer_norm_rms_epsilon"), eps));
    }
    if (!(base > 0 && std::isfinite(base))) {
      return Status::Corruption(
          fmt::format("{}: hyper-parameter {} = {} must be positive and finite", f_.path(), key("rope.freq_base"), base));
    }
    h.rms_eps = static_cast<float>(eps);
    h.rope_freq_base = static_cast<float>(base);
    LS_ASSIGN_OR_RETURN(h.rope_scaling_type, f_.get_string_or(key("rope.scaling.type"), "none"));
    LS_ASSIGN_OR_RETURN(double factor, f_.get_float_or(key("rope.scaling.factor"), 1.0));
    if (f_.has(key("rope.scale_linear")) && !f_.has(key("rope.scaling.type"))) {  // older files
      LS_ASSIGN_OR_RETURN(factor, f_.get_float(key("rope.scale_linear")));
      h.rope_scaling_type = "linear";
    }
    if (h.rope_scaling_type != "none" && h.rope_scaling_type != "linear" && h.rope_scaling_type != "yarn") {
      return Status::Unsupported(fmt::format("{}: {} = '{}' is not supported (none, linear, yarn)", f_.path(),
                                             key("rope.scaling.type"), h.rope_scaling_type));
    }
    if (!(factor > 0 && std::isfinite(factor))) {
      return Status::Corruption(
          fmt::format("{}: hyper-parameter {} = {} must be positive", f_.path(), key("rope.scaling.factor"), factor));
    }
    h.rope_scaling_factor = static_cast<float>(factor);
    LS_ASSIGN_OR_RETURN(h.rope_scaling_orig_ctx,
                        f_.get_u32_or(key("rope.scaling.original_context_length"), h.n_ctx_train));
    LS_RETURN_IF_ERROR(read_moe_hparams());
    return read_arch_hparams();
  }

  // A mixture of experts: qwen3moe and gpt-oss always, llama when
  // <arch>.expert_count > 0 (Mixtral). llama.cpp reads a llama file with
  // expert_count 0 as dense.
  Status read_moe_hparams() {
    LlamaHparams& h = m_.hparams;
    const bool moe_arch = h.arch == "qwen3moe" || h.arch == "gpt-oss";
    const bool has_router = f_.find_tensor("blk.0.ffn_gate_inp.weight") != nullptr;
    if (!moe_arch && !f_.has(key("expert_count"))) {
      if (!has_router) return Status::OK();
      return Status::NotFound(fmt::format("{}: key '{}' is missing but the file has expert tensors "
                                          "(blk.0.ffn_gate_inp.weight)", f_.path(), key("expert_count")));
    }
    LS_ASSIGN_OR_RETURN(h.n_expert, f_.get_u32(key("expert_count")));
    if (h.n_expert == 0) {
      if (moe_arch) return bad_hparam(key("expert_count"), 0, fmt::format("must be > 0 ({} is a mixture of experts)", h.arch));
      if (has_router) return bad_hparam(key("expert_count"), 0, "but the file has expert tensors: must be > 0");
      return Status::OK();
    }
    if (h.n_expert > kMaxExperts) return bad_hparam(key("expert_count"), h.n_expert, fmt::format("exceeds the limit {}", kMaxExperts));
    LS_ASSIGN_OR_RETURN(h.n_expert_used, f_.get_u32(key("expert_used_count")));
    if (h.n_expert_used == 0 || h.n_expert_used > h.n_expert) {
      return bad_hparam(key("expert_used_count"), h.n_expert_used,
                        fmt::format("must be in 1..{} (expert_count)", h.n_expert));
    }
    // llama.cpp: qwen3moe's experts are expert_feed_forward_length wide (else
    // n_ff / n_expert_used), gpt-oss's likewise (the key is required);
    // Mixtral's are feed_forward_length wide.
    h.n_ff_exp = h.n_ff;
    if (h.traits.gpt_oss) {
      LS_ASSIGN_OR_RETURN(h.n_ff_exp, f_.get_u32(key("expert_feed_forward_length")));
    } else if (moe_arch) {
      LS_ASSIGN_OR_RETURN(h.n_ff_exp, f_.get_u32_or(key("expert_feed_forward_length"), h.n_ff / h.n_expert_used));
    }
    if (h.n_ff_exp == 0) return bad_hparam(key("expert_feed_forward_length"), 0, "must be > 0");
    LS_ASSIGN_OR_RETURN(uint32_t shared, f_.get_u32_or(key("expert_shared_count"), 0));
    if (shared != 0) {
      return Status::Unsupported(fmt::format("{}: {} = {} (shared experts) is not supported for architecture '{}'",
                                             f_.path(), key("expert_shared_count"), shared, h.arch));
    }
    // gpt-oss's gating is a softmax over the chosen experts' logits, which
    // moe_route computes too (the softmax over all, renormalised over the chosen).
    LS_ASSIGN_OR_RETURN(uint32_t gating, f_.get_u32_or(key("expert_gating_func"), 1));
    if (gating != 1 && !h.traits.gpt_oss) {  // llama.cpp: 1 softmax, 2 sigmoid
      return Status::Unsupported(fmt::format("{}: {} = {} is not supported (only 1, softmax)", f_.path(),
                                             key("expert_gating_func"), gating));
    }
    return Status::OK();
  }

  // The hyper-parameters only some architectures have.
  Status read_arch_hparams() {
    LlamaHparams& h = m_.hparams;
    if (h.traits.gpt_oss && h.rope_scaling_type == "yarn") {
      // YaRN changes every rotation's frequency and magnitude, not only past the training context.
      return Status::Unsupported(fmt::format("{}: {} = 'yarn' is not implemented for architecture 'gpt-oss' "
                                             "(its RoPE would be wrong at every position)", f_.path(), key("rope.scaling.type")));
    }
    double scale = 1.0 / std::sqrt(double(h.head_dim));
    if (h.arch == "gemma3" && h.n_layers == 62) scale = 1.0 / std::sqrt(double(h.n_embd / h.n_head));  // 27B
    LS_ASSIGN_OR_RETURN(scale, f_.get_float_or(key("attention.scale"), scale));
    if (!(scale > 0 && std::isfinite(scale))) {
      return Status::Corruption(
          fmt::format("{}: hyper-parameter {} = {} must be positive and finite", f_.path(), key("attention.scale"), scale));
    }
    h.attn_scale = static_cast<float>(scale);
    LS_ASSIGN_OR_RETURN(double softcap, f_.get_float_or(key("final_logit_softcapping"), 0.0));
    if (softcap != 0) {
      return Status::Unsupported(fmt::format("{}: {} = {} (logit soft-capping) is not supported", f_.path(),
                                             key("final_logit_softcapping"), softcap));
    }
    if (!h.traits.sliding_window) {
      if (f_.has(key("attention.sliding_window"))) {
        return Status::Unsupported(fmt::format("{}: {} is not supported for architecture '{}'", f_.path(),
                                               key("attention.sliding_window"), h.arch));
      }
      return Status::OK();
    }
    if (h.traits.gpt_oss) {  // llama.cpp requires it for gpt-oss
      LS_ASSIGN_OR_RETURN(h.n_swa, f_.get_u32(key("attention.sliding_window")));
    } else {
      LS_ASSIGN_OR_RETURN(h.n_swa, f_.get_u32_or(key("attention.sliding_window"), 0));
    }
    if (h.n_swa == 0) return Status::OK();
    h.swa_layers.assign(h.n_layers, false);
    if (const GgufValue* arr = f_.find(key("attention.sliding_window_pattern")); arr && arr->is_array()) {
      const GgufType et = arr->array_type();
      if (arr->array_size() != h.n_layers || et == GgufType::kString || et == GgufType::kFloat32 ||
          et == GgufType::kFloat64 || et == GgufType::kArray) {
        return bad_hparam(key("attention.sliding_window_pattern") + " (entries)", arr->array_size(),
                          fmt::format("must be {} booleans (one per block)", h.n_layers));
      }
      for (uint32_t i = 0; i < h.n_layers; ++i) h.swa_layers[i] = arr->array_int(i) != 0;
    } else {
      LS_ASSIGN_OR_RETURN(uint32_t pattern, f_.get_u32_or(key("attention.sliding_window_pattern"), h.traits.swa_pattern));
      for (uint32_t i = 0; i < h.n_layers; ++i) h.swa_layers[i] = pattern == 0 || i % pattern < pattern - 1;
    }
    // gpt-oss's local layers default to the global base, gemma3's to 10000.
    const double base_swa_default = h.traits.gpt_oss ? h.rope_freq_base : 10000.0;
    LS_ASSIGN_OR_RETURN(double base_swa, f_.get_float_or(key("rope.freq_base_swa"), base_swa_default));
    if (!(base_swa > 0 && std::isfinite(base_swa))) {
      return Status::Corruption(fmt::format("{}: hyper-parameter {} = {} must be positive and finite", f_.path(),
                                            key("rope.freq_base_swa"), base_swa));
    }
    h.rope_freq_base_swa = static_cast<float>(base_swa);
    return Status::OK();
  }

  Result<GgufTensorInfo> tensor(const std::string& name, std::vector<uint64_t> shape, bool f32_only) {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) return Status::NotFound(fmt::format("{}: tensor '{}' is missing", f_.path(), name));
    std::vector<uint64_t> dims = t->dims;
    while (dims.size() > shape.size() && dims.back() == 1) dims.pop_back();  // trailing 1s are no-ops
    if (dims != shape) {
      GgufTensorInfo want;
      want.dims = shape;
      return Status::Corruption(fmt::format("{}: tensor '{}' has shape {}; expected {}", f_.path(), name,
                                            t->shape_string(), want.shape_string()));
    }
    if (f32_only && t->type != GgmlType::F32) {
      return Status::Unsupported(fmt::format("{}: tensor '{}' has type {}; norms and biases must be F32", f_.path(),
                                             name, ggml_type_name(static_cast<uint32_t>(t->type))));
    }
    auto tr = ggml_type_traits(t->type);
    if (!tr.supported) {
      return Status::Unsupported(fmt::format("{}: tensor '{}': unsupported tensor type {} (id {})", f_.path(), name,
                                             tr.name, static_cast<uint32_t>(t->type)));
    }
    return *t;
  }

  Result<std::optional<GgufTensorInfo>> optional_tensor(const std::string& name, std::vector<uint64_t> shape) {
    if (!f_.find_tensor(name)) return std::optional<GgufTensorInfo>();
    LS_ASSIGN_OR_RETURN(GgufTensorInfo t, tensor(name, std::move(shape), true));
    return std::optional<GgufTensorInfo>(std::move(t));
  }

  Status read_tensors() {
    LlamaHparams& h = m_.hparams;
    const GgufTensorInfo* embd = f_.find_tensor("token_embd.weight");
    if (!embd) return Status::NotFound(f_.path() + ": tensor 'token_embd.weight' is missing");
    if (embd->dims.size() < 2 || embd->dims[1] == 0 || embd->dims[1] > (uint64_t{1} << 31)) {
      return Status::Corruption(fmt::format("{}: tensor 'token_embd.weight' has shape {}; expected [{}, n_vocab]",
                                            f_.path(), embd->shape_string(), h.n_embd));
    }
    h.n_vocab = static_cast<uint32_t>(embd->dims[1]);
    if (f_.has(key("vocab_size"))) {
      LS_ASSIGN_OR_RETURN(uint32_t vs, f_.get_u32(key("vocab_size")));
      if (vs != h.n_vocab) return bad_hparam(key("vocab_size"), vs, fmt::format("does not match token_embd's {}", h.n_vocab));
    }
    if (const GgufValue* toks = f_.find("tokenizer.ggml.tokens"); toks && toks->array_size() != h.n_vocab) {
      return bad_hparam("tokenizer.ggml.tokens (count)", toks->array_size(),
                        fmt::format("does not match the vocabulary size {} of token_embd", h.n_vocab));
    }
    const uint64_t e = h.n_embd, q = uint64_t{h.n_head} * h.head_dim, kv = uint64_t{h.n_head_kv} * h.head_dim;
    LS_ASSIGN_OR_RETURN(m_.token_embd, tensor("token_embd.weight", {e, h.n_vocab}, false));
    LS_ASSIGN_OR_RETURN(m_.output_norm, tensor("output_norm.weight", {e}, true));
    if (f_.find_tensor("output.weight")) {
      LS_ASSIGN_OR_RETURN(m_.output, tensor("output.weight", {e, h.n_vocab}, false));
    } else {
      m_.output = m_.token_embd;
      m_.output_tied = true;
    }
    m_.blocks.resize(h.n_layers);
    for (uint32_t i = 0; i < h.n_layers; ++i) {
      LlamaBlock& b = m_.blocks[i];
      auto n = [i](const char* part) { return fmt::format("blk.{}.{}", i, part); };
      LS_ASSIGN_OR_RETURN(b.attn_norm, tensor(n("attn_norm.weight"), {e}, true));
      LS_ASSIGN_OR_RETURN(b.attn_q, tensor(n("attn_q.weight"), {e, q}, false));
      LS_ASSIGN_OR_RETURN(b.attn_k, tensor(n("attn_k.weight"), {e, kv}, false));
      LS_ASSIGN_OR_RETURN(b.attn_v, tensor(n("attn_v.weight"), {e, kv}, false));
      LS_ASSIGN_OR_RETURN(b.attn_output, tensor(n("attn_output.weight"), {q, e}, false));
      LS_ASSIGN_OR_RETURN(b.ffn_norm, tensor(n(h.traits.gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), {e}, true));
      if (h.is_moe()) {
        LS_RETURN_IF_ERROR(read_experts(i, b));
      } else {
        LS_ASSIGN_OR_RETURN(b.ffn_gate, tensor(n("ffn_gate.weight"), {e, h.n_ff}, false));
        LS_ASSIGN_OR_RETURN(b.ffn_up, tensor(n("ffn_up.weight"), {e, h.n_ff}, false));
        LS_ASSIGN_OR_RETURN(b.ffn_down, tensor(n("ffn_down.weight"), {h.n_ff, e}, false));
      }
      LS_ASSIGN_OR_RETURN(b.attn_q_bias, optional_tensor(n("attn_q.bias"), {q}));
      LS_ASSIGN_OR_RETURN(b.attn_k_bias, optional_tensor(n("attn_k.bias"), {kv}));
      LS_ASSIGN_OR_RETURN(b.attn_v_bias, optional_tensor(n("attn_v.bias"), {kv}));
      if (h.traits.qk_norm) {
        LS_ASSIGN_OR_RETURN(b.attn_q_norm, tensor(n("attn_q_norm.weight"), {h.head_dim}, true));
        LS_ASSIGN_OR_RETURN(b.attn_k_norm, tensor(n("attn_k_norm.weight"), {h.head_dim}, true));
      }
      if (h.traits.post_norms) {
        LS_ASSIGN_OR_RETURN(b.attn_post_norm, tensor(n("post_attention_norm.weight"), {e}, true));
        LS_ASSIGN_OR_RETURN(b.ffn_post_norm, tensor(n("post_ffw_norm.weight"), {e}, true));
      }
      if (h.traits.gpt_oss) {
        LS_ASSIGN_OR_RETURN(b.attn_output_bias, tensor(n("attn_output.bias"), {e}, true));
        LS_ASSIGN_OR_RETURN(b.attn_sinks, tensor(n("attn_sinks.weight"), {h.n_head}, true));
      }
    }
    LS_ASSIGN_OR_RETURN(m_.rope_freqs, optional_tensor("rope_freqs.weight", {h.n_rot / 2}));
    return Status::OK();
  }

  // A mixture-of-experts block's router and expert tensors (GGUF's 3-D layout:
  // ne2 = the expert, so each expert's matrix is one contiguous slice).
  Status read_experts(uint32_t i, LlamaBlock& b) {
    const LlamaHparams& h = m_.hparams;
    auto n = [i](const char* part) { return fmt::format("blk.{}.{}", i, part); };
    const uint64_t e = h.n_embd, ff = h.n_ff_exp, ne = h.n_expert;
    MoeTensors t;
    LS_ASSIGN_OR_RETURN(t.router, tensor(n("ffn_gate_inp.weight"), {e, ne}, false));
    LS_ASSIGN_OR_RETURN(t.gate_exps, tensor(n("ffn_gate_exps.weight"), {e, ff, ne}, false));
    LS_ASSIGN_OR_RETURN(t.up_exps, tensor(n("ffn_up_exps.weight"), {e, ff, ne}, false));
    LS_ASSIGN_OR_RETURN(t.down_exps, tensor(n("ffn_down_exps.weight"), {ff, e, ne}, false));
    if (h.traits.gpt_oss) {
      LS_ASSIGN_OR_RETURN(t.router_bias, tensor(n("ffn_gate_inp.bias"), {ne}, true));
      LS_ASSIGN_OR_RETURN(t.gate_bias, tensor(n("ffn_gate_exps.bias"), {ff, ne}, true));
      LS_ASSIGN_OR_RETURN(t.up_bias, tensor(n("ffn_up_exps.bias"), {ff, ne}, true));
      LS_ASSIGN_OR_RETURN(t.down_bias, tensor(n("ffn_down_exps.bias"), {e, ne}, true));
    }
    b.moe = std::move(t);
    return Status::OK();
  }

  static ModelLayer make_layer(LayerKind kind, std::string name, int block, std::vector<GgufTensorInfo> tensors) {
    ModelLayer l;
    l.kind = kind;
    l.name = std::move(name);
    l.block = block;
    l.span_begin = UINT64_MAX;
    for (const auto& t : tensors) {
      l.tensor_bytes += t.n_bytes;
      l.span_begin = std::min(l.span_begin, t.offset);
      l.span_end = std::max(l.span_end, t.end());
    }
    l.aligned_begin = l.span_begin / kDirectIoAlignment * kDirectIoAlignment;
    l.aligned_end = (l.span_end + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
    std::vector<std::pair<uint64_t, uint64_t>> parts;
    for (const auto& t : tensors) parts.emplace_back(t.offset, t.end());
    std::sort(parts.begin(), parts.end());
    for (const auto& [b, e] : parts) {
      // Tensors closer than one direct-I/O block (alignment padding) share a range.
      if (!l.ranges.empty() && b <= l.ranges.back().end + kDirectIoAlignment) {
        l.ranges.back().end = std::max(l.ranges.back().end, e);
      } else {
        l.ranges.push_back({b, e, 0, 0});
      }
    }
    for (auto& r : l.ranges) {
      r.aligned_begin = r.begin / kDirectIoAlignment * kDirectIoAlignment;
      r.aligned_end = (r.end + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
    }
    l.tensors = std::move(tensors);
    return l;
  }

  void build_layers() {
    m_.layers.push_back(make_layer(LayerKind::kEmbedding, "embedding", -1, {m_.token_embd}));
    m_.total_tensor_bytes = m_.token_embd.n_bytes + m_.output_norm.n_bytes + (m_.output_tied ? 0 : m_.output.n_bytes) +
                            (m_.rope_freqs ? m_.rope_freqs->n_bytes : 0);
    for (size_t i = 0; i < m_.blocks.size(); ++i) {
      const LlamaBlock& b = m_.blocks[i];
      std::vector<GgufTensorInfo> ts = {b.attn_norm, b.attn_q, b.attn_k, b.attn_v, b.attn_output, b.ffn_norm};
      if (b.moe) {  // the experts are part of the block: placed, streamed and computed with it
        ts.insert(ts.end(), {b.moe->router, b.moe->gate_exps, b.moe->up_exps, b.moe->down_exps});
        for (const auto* bias : {&b.moe->router_bias, &b.moe->gate_bias, &b.moe->up_bias, &b.moe->down_bias}) {
          if (*bias) ts.push_back(**bias);
        }
      } else {
        ts.insert(ts.end(), {b.ffn_gate, b.ffn_up, b.ffn_down});
      }
      for (const auto* opt : {&b.attn_q_bias, &b.attn_k_bias, &b.attn_v_bias, &b.attn_q_norm, &b.attn_k_norm,
                              &b.attn_post_norm, &b.ffn_post_norm, &b.attn_output_bias, &b.attn_sinks}) {
        if (*opt) ts.push_back(**opt);
      }
      ModelLayer l = make_layer(LayerKind::kBlock, fmt::format("blk.{}", i), static_cast<int>(i), std::move(ts));
      m_.total_tensor_bytes += l.tensor_bytes;
      m_.layers.push_back(std::move(l));
    }
    m_.layers.push_back(make_layer(LayerKind::kHead, "head", -1, {m_.output_norm, m_.output}));
  }

  const GgufFile& f_;
  LlamaModel m_;
};

}  // namespace

Result<LlamaModel> load_llama_model(const GgufFile& file) { return LlamaLoader(file).load(); }

}  // namespace layerstream

#include "runtime/model/example_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kernels/math/convert_row.h"
#include "runtime/core/status_macros.h"
#include "runtime/model/quantize_plan.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/tokenizer/example_vocab.h"

namespace layerstream {

namespace {

constexpr uint32_t kAlign = 4096;  // for size estimates

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// xoshiro256+ (Blackman & Vigna): fast, good enough for weights.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (auto& w : s_) w = seed = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t r = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return r;
  }
  // Uniform in [-1, 1).
  float symmetric() { return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }

 private:
  uint64_t s_[4];
};

// How a tensor's values are drawn: uniform in [center - amp, center + amp).
struct Dist {
  float center, amp;
};

// Uniform with standard deviation `std`: amplitude std * sqrt(3).
Dist with_std(double std) { return {0.0f, static_cast<float>(std * std::sqrt(3.0))}; }

Dist dist_for(const std::string& name, const ExampleModelSpec& s) {
  const double residual = 1.0 / std::sqrt(2.0 * s.n_layers);  // keeps the residual stream's variance bounded
  const double e = s.n_embd, ff = s.n_ff;
  if (name.find("norm") != std::string::npos) return {1.0f, 0.1f};
  if (name.find("attn_sinks") != std::string::npos) return with_std(1.0);  // gpt-oss's per-head sink logits
  if (name.find(".bias") != std::string::npos) return with_std(0.1);
  if (name == "rope_freqs.weight") return {8.0f, 7.0f};  // factors in [1, 15)
  if (name == "token_embd.weight") return with_std(1.0);
  if (name == "output.weight") return with_std(1.0 / std::sqrt(e));
  if (name.find("attn_output") != std::string::npos) return with_std(residual / std::sqrt(e));
  if (name.find("ffn_down") != std::string::npos) return with_std(residual / std::sqrt(ff));
  return with_std(1.0 / std::sqrt(e));  // attn_q/k/v, ffn_gate/up
}

uint32_t head_dim(const ExampleModelSpec& s) {
  if (s.head_dim) return s.head_dim;
  return s.n_head ? s.n_embd / s.n_head : 0;
}

struct TensorDecl {
  std::string name;
  std::vector<uint64_t> dims;
  GgmlType type;
};

// A mix's per-tensor types: what `layerstream quantize` (llama.cpp's rules,
// quantize_plan.h) makes of the F16 model of the same shape, so the rule of
// which tensors keep more bits, and the fallback for short rows, has one home.
void apply_mix(const ExampleModelSpec& s, std::vector<TensorDecl>& decls) {
  std::vector<GgufTensorInfo> infos(decls.size());
  for (size_t i = 0; i < decls.size(); ++i) {
    infos[i].name = decls[i].name;
    infos[i].dims = decls[i].dims;
    infos[i].type = decls[i].type;
  }
  const QuantModelFacts facts{example_file_arch(s), static_cast<int>(s.n_layers), static_cast<int>(s.n_head),
                              static_cast<int>(s.n_head_kv), static_cast<int>(s.n_expert)};
  // Every mix is a llama.cpp file type, and the spec's widths are multiples
  // of 32, which every fallback holds: the plan cannot fail.
  auto plan = plan_quantization(facts, infos, *parse_quant_target(example_mix_name(s.mix)), PlanOptions{});
  LS_CHECK_MSG(plan.ok(), plan.status().ToString());
  for (size_t i = 0; i < decls.size(); ++i) decls[i].type = (*plan)[i].type;
}

bool is_moe_arch(const std::string& arch) { return arch == "qwen3moe" || arch == "mixtral" || arch == "gpt-oss"; }

uint32_t sliding_window(const ExampleModelSpec& s) { return s.arch == "gpt-oss" && !s.sliding_window ? 128 : s.sliding_window; }

std::vector<TensorDecl> tensor_decls(const ExampleModelSpec& s) {
  const uint64_t e = s.n_embd, hd = head_dim(s), q = uint64_t{s.n_head} * hd, kv = uint64_t{s.n_head_kv} * hd;
  const bool qk_norm = s.arch == "qwen3" || s.arch == "gemma3" || s.arch == "qwen3moe";
  const bool post_norms = s.arch == "gemma3";
  const bool gpt_oss = s.arch == "gpt-oss";  // biases, sinks, post_attention_norm as the FFN norm
  std::vector<TensorDecl> out;
  auto f32 = [&](std::string name, std::vector<uint64_t> dims) { out.push_back({std::move(name), std::move(dims), GgmlType::F32}); };
  // Uniform: dtype, or llama.cpp's fallback where its block does not divide
  // the rows. A mix's types come from the quantiser's rules (apply_mix).
  auto matrix = [&](std::string name, uint64_t ne0, uint64_t ne1) {
    GgmlType t = GgmlType::F16;
    if (s.mix == ExampleMix::kUniform) {
      t = ne0 % ggml_type_traits(s.dtype).block_elems == 0 ? s.dtype : quant_fallback_type(s.dtype, ne0);
    }
    out.push_back({std::move(name), {ne0, ne1}, t});
  };
  // A 3-D expert tensor: n_expert matrices [ne0, ne1], one contiguous slice each.
  auto experts = [&](std::string name, uint64_t ne0, uint64_t ne1) {
    matrix(std::move(name), ne0, ne1);
    out.back().dims.push_back(s.n_expert);
    if (s.expert_dtype) out.back().type = *s.expert_dtype;
  };
  matrix("token_embd.weight", e, s.n_vocab);
  if (s.rope_freqs) out.push_back({"rope_freqs.weight", {hd / 2}, GgmlType::F32});
  for (uint32_t i = 0; i < s.n_layers; ++i) {
    auto n = [i](const char* p) { return fmt::format("blk.{}.{}", i, p); };
    out.push_back({n("attn_norm.weight"), {e}, GgmlType::F32});
    matrix(n("attn_q.weight"), e, q);
    matrix(n("attn_k.weight"), e, kv);
    matrix(n("attn_v.weight"), e, kv);
    if (gpt_oss) {
      f32(n("attn_q.bias"), {q});
      f32(n("attn_k.bias"), {kv});
      f32(n("attn_v.bias"), {kv});
    }
    if (qk_norm) {
      out.push_back({n("attn_q_norm.weight"), {hd}, GgmlType::F32});
      out.push_back({n("attn_k_norm.weight"), {hd}, GgmlType::F32});
    }
    matrix(n("attn_output.weight"), q, e);
    if (gpt_oss) {
      f32(n("attn_output.bias"), {e});
      f32(n("attn_sinks.weight"), {s.n_head});
    }
    if (post_norms || gpt_oss) out.push_back({n("post_attention_norm.weight"), {e}, GgmlType::F32});
    if (!gpt_oss) out.push_back({n("ffn_norm.weight"), {e}, GgmlType::F32});
    if (s.n_expert > 0) {
      out.push_back({n("ffn_gate_inp.weight"), {e, s.n_expert}, GgmlType::F32});
      experts(n("ffn_gate_exps.weight"), e, s.n_ff);
      experts(n("ffn_down_exps.weight"), s.n_ff, e);
      experts(n("ffn_up_exps.weight"), e, s.n_ff);
      if (gpt_oss) {
        f32(n("ffn_gate_inp.bias"), {s.n_expert});
        f32(n("ffn_gate_exps.bias"), {s.n_ff, s.n_expert});
        f32(n("ffn_down_exps.bias"), {e, s.n_expert});
        f32(n("ffn_up_exps.bias"), {s.n_ff, s.n_expert});
      }
    } else {
      matrix(n("ffn_gate.weight"), e, s.n_ff);
      matrix(n("ffn_up.weight"), e, s.n_ff);
      matrix(n("ffn_down.weight"), s.n_ff, e);
    }
    if (post_norms) out.push_back({n("post_ffw_norm.weight"), {e}, GgmlType::F32});
  }
  out.push_back({"output_norm.weight", {e}, GgmlType::F32});
  if (!s.tied_output) matrix("output.weight", e, s.n_vocab);
  if (s.mix != ExampleMix::kUniform) apply_mix(s, out);
  return out;
}

uint64_t padded_bytes(const TensorDecl& t) {
  const GgmlTypeTraits tr = ggml_type_traits(t.type);
  uint64_t n = 1;
  for (uint64_t d : t.dims) n *= d;
  const uint64_t b = n / tr.block_elems * tr.block_bytes;
  return (b + kAlign - 1) / kAlign * kAlign;
}

// Approximate file size (exact tensor bytes, estimated header).
uint64_t estimate_bytes(const ExampleModelSpec& s) {
  uint64_t total = 0;
  for (const auto& t : tensor_decls(s)) total += padded_bytes(t);
  return total + uint64_t{s.n_vocab} * 24 + 8192;
}

ExampleModelSpec shape_for_width(uint32_t h, GgmlType dtype, uint64_t target, uint64_t seed, ExampleMix mix) {
  ExampleModelSpec s;
  s.dtype = dtype;
  s.mix = mix;
  s.seed = seed;
  s.n_embd = h;
  const uint32_t hd = h >= 2048 ? 128 : (h >= 128 ? 64 : 32);
  s.n_head = h / hd;
  s.n_head_kv = (s.n_head % 4 == 0) ? s.n_head / 4 : s.n_head;
  const uint32_t ff_round = h >= 1024 ? 256 : 32;
  s.n_ff = (h * 8 / 3 + ff_round - 1) / ff_round * ff_round;
  s.n_ctx = 4096;
  const GgmlTypeTraits tr = ggml_type_traits(dtype);
  s.n_vocab = 512;
  for (uint32_t v : {32000u, 16384u, 8192u, 4096u, 2048u, 1024u, 512u}) {
    const double embed = 2.0 * v * h * tr.block_bytes / tr.block_elems;
    if (embed <= 0.25 * static_cast<double>(target)) {
      s.n_vocab = v;
      break;
    }
  }
  s.n_layers = 1;
  const uint64_t fixed = estimate_bytes(s);
  ExampleModelSpec two = s;
  two.n_layers = 2;
  const uint64_t per_layer = estimate_bytes(two) - fixed;
  if (target > fixed) {
    s.n_layers = static_cast<uint32_t>(std::clamp<uint64_t>((target - fixed + per_layer / 2) / per_layer + 1, 1, 65536));
  }
  if (s.mix != ExampleMix::kUniform && target > 0) {
    // A mix's layers differ in size (some at higher precision): the closest
    // count near the linear estimate.
    const uint32_t guess = s.n_layers;
    auto err = [&](const ExampleModelSpec& c) {
      return std::fabs(static_cast<double>(estimate_bytes(c)) - static_cast<double>(target));
    };
    ExampleModelSpec best = s;
    for (uint32_t n = guess > 4 ? guess - 4 : 1; n <= std::min<uint32_t>(guess + 4, 65536); ++n) {
      ExampleModelSpec c = s;
      c.n_layers = n;
      if (err(c) < err(best)) best = c;
    }
    s = best;
  }
  return s;
}

}  // namespace

std::string example_file_arch(const ExampleModelSpec& spec) { return spec.arch == "mixtral" ? "llama" : spec.arch; }

GgmlType example_mix_base(ExampleMix mix) {
  switch (mix) {
    case ExampleMix::kQ4_K_M: return GgmlType::Q4_K;
    case ExampleMix::kQ5_K_M: return GgmlType::Q5_K;
    case ExampleMix::kQ3_K_M: return GgmlType::Q3_K;
    default: return GgmlType::F16;
  }
}

std::optional<ExampleMix> parse_example_mix(std::string_view name) {
  for (ExampleMix m : {ExampleMix::kQ4_K_M, ExampleMix::kQ5_K_M, ExampleMix::kQ3_K_M}) {
    const std::string_view n = example_mix_name(m);
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size() && eq; ++i) eq = std::toupper(static_cast<unsigned char>(name[i])) == n[i];
    if (eq) return m;
  }
  return std::nullopt;
}

const char* example_mix_name(ExampleMix mix) {
  switch (mix) {
    case ExampleMix::kQ4_K_M: return "Q4_K_M";
    case ExampleMix::kQ5_K_M: return "Q5_K_M";
    case ExampleMix::kQ3_K_M: return "Q3_K_M";
    default: return "uniform";
  }
}

uint32_t llama_file_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q4_1: return 3;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q5_0: return 8;
    case GgmlType::Q5_1: return 9;
    case GgmlType::Q2_K: return 10;
    case GgmlType::Q3_K: return 11;  // Q3_K_S
    case GgmlType::Q4_K: return 14;  // Q4_K_S
    case GgmlType::Q5_K: return 16;  // Q5_K_S
    case GgmlType::Q6_K: return 18;
    case GgmlType::IQ4_NL: return 25;
    case GgmlType::IQ4_XS: return 30;
    case GgmlType::BF16: return 32;
    default: return 1024;  // LLAMA_FTYPE_GUESSED
  }
}

uint32_t llama_file_type(const ExampleModelSpec& spec) {
  switch (spec.mix) {
    case ExampleMix::kQ4_K_M: return 15;
    case ExampleMix::kQ5_K_M: return 17;
    case ExampleMix::kQ3_K_M: return 12;
    default:
      if (spec.expert_dtype == GgmlType::MXFP4) return 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
      return llama_file_type(spec.dtype);
  }
}

namespace {

// The experts' own type: a mixture of experts only, supported, its block
// dividing both expert widths, and not with a mix (whose rules type every matrix).
Status validate_expert_dtype(const ExampleModelSpec& s) {
  if (s.arch == "gpt-oss" && s.mix != ExampleMix::kUniform) {
    return Status::InvalidArgument(fmt::format("example model: mix {} is not available for arch gpt-oss", example_mix_name(s.mix)));
  }
  if (!s.expert_dtype) return Status::OK();
  const GgmlTypeTraits tr = ggml_type_traits(*s.expert_dtype);
  if (!is_moe_arch(s.arch)) return Status::InvalidArgument("example model: an expert type needs a mixture-of-experts arch");
  if (s.mix != ExampleMix::kUniform) return Status::InvalidArgument("example model: an expert type cannot be combined with a mix");
  if (!tr.supported) return Status::Unsupported(fmt::format("unsupported expert tensor type {}", tr.name));
  if (s.n_embd % tr.block_elems || s.n_ff % tr.block_elems) {
    return Status::InvalidArgument(fmt::format("example model: hidden {} and ffn {} must be multiples of {} for expert type {}",
                                               s.n_embd, s.n_ff, tr.block_elems, tr.name));
  }
  return Status::OK();
}

}  // namespace

Status validate_example_spec(const ExampleModelSpec& s) {
  if (s.mix != ExampleMix::kUniform && s.dtype != example_mix_base(s.mix)) {
    return Status::InvalidArgument(fmt::format("example model: mix {} needs dtype {}, not {}", example_mix_name(s.mix),
                                               ggml_type_traits(example_mix_base(s.mix)).name, ggml_type_traits(s.dtype).name));
  }
  if (s.alignment < 32 || s.alignment > 65536 || (s.alignment & (s.alignment - 1)) != 0) {
    return Status::InvalidArgument(
        fmt::format("example model: alignment = {} must be a power of two in 32..65536 (4096 to stream, 32 for llama.cpp's tools)", s.alignment));
  }
  // 256-element block types fall back to a 32-element type for rows that are
  // not a multiple of 256 (quant_fallback_type), so widths need only be multiples of 32.
  GgmlTypeTraits tr = ggml_type_traits(s.dtype);
  if (tr.supported && tr.block_elems == 256) tr.block_elems = 32;
  if (!tr.supported) {
    return Status::Unsupported(fmt::format("unsupported tensor type {} (id {})", tr.name, static_cast<uint32_t>(s.dtype)));
  }
  auto bad = [](const char* what, uint64_t v, const std::string& rule) {
    return Status::InvalidArgument(fmt::format("example model: {} = {} {}", what, v, rule));
  };
  if (s.n_layers == 0 || s.n_layers > 65536) return bad("layers", s.n_layers, "must be in 1..65536");
  if (s.n_embd == 0 || s.n_embd > 65536) return bad("hidden", s.n_embd, "must be in 1..65536");
  if (s.n_ff == 0 || s.n_ff > 262144) return bad("ffn", s.n_ff, "must be in 1..262144");
  if (s.n_head == 0 || s.n_embd % s.n_head) return bad("heads", s.n_head, fmt::format("must divide hidden {}", s.n_embd));
  if (s.n_head_kv == 0 || s.n_head % s.n_head_kv) {
    return bad("kv-heads", s.n_head_kv, fmt::format("must divide heads {}", s.n_head));
  }
  if (head_dim(s) % 2 || head_dim(s) == 0) return bad("head dim", head_dim(s), "must be even and > 0");
  if (s.arch != "llama" && s.arch != "qwen3" && s.arch != "gemma3" && !is_moe_arch(s.arch)) {
    return Status::InvalidArgument(
        fmt::format("example model: arch '{}' is not one of llama, qwen3, gemma3, qwen3moe, mixtral, gpt-oss", s.arch));
  }
  LS_RETURN_IF_ERROR(validate_expert_dtype(s));
  if (is_moe_arch(s.arch) != (s.n_expert > 0)) {
    return bad("experts", s.n_expert, fmt::format("must be {} for arch {}", is_moe_arch(s.arch) ? "> 0" : "0", s.arch));
  }
  if (s.n_expert > 512) return bad("experts", s.n_expert, "exceeds llama.cpp's limit 512");
  if (s.n_expert > 0 && (s.n_expert_used == 0 || s.n_expert_used > s.n_expert)) {
    return bad("experts-used", s.n_expert_used, fmt::format("must be in 1..{} (experts)", s.n_expert));
  }
  if (s.rope_freqs && s.arch != "llama") {
    return Status::InvalidArgument("example model: rope_freqs (Llama 3.1 frequency factors) needs arch llama");
  }
  if (s.sliding_window && s.arch != "gemma3" && s.arch != "gpt-oss") {
    return Status::InvalidArgument("example model: a sliding window needs arch gemma3 or gpt-oss");
  }
  if (const uint64_t q = uint64_t{s.n_head} * head_dim(s); q % tr.block_elems) {
    return bad("heads x head dim", q, fmt::format("must be a multiple of {} for {}", tr.block_elems, tr.name));
  }
  if (s.n_embd % tr.block_elems) return bad("hidden", s.n_embd, fmt::format("must be a multiple of {} for {}", tr.block_elems, tr.name));
  if (s.n_ff % tr.block_elems) return bad("ffn", s.n_ff, fmt::format("must be a multiple of {} for {}", tr.block_elems, tr.name));
  if (s.n_vocab < kMinExampleVocabSize || s.n_vocab > (1u << 24)) {
    return bad("vocab", s.n_vocab, fmt::format("must be in {}..{}", kMinExampleVocabSize, 1u << 24));
  }
  if (s.n_ctx == 0) return bad("ctx", 0, "must be > 0");
  return Status::OK();
}

Result<ExampleModelSpec> example_spec_for_size(uint64_t target, GgmlType dtype, uint64_t seed, ExampleMix mix) {
  const GgmlTypeTraits tr = ggml_type_traits(dtype);
  if (!tr.supported) {
    return Status::Unsupported(fmt::format("unsupported tensor type {} (id {})", tr.name, static_cast<uint32_t>(dtype)));
  }
  // Widest shape that still has enough layers for a whole layer to be a
  // small fraction of the total (so rounding the layer count stays within 5%).
  std::optional<ExampleModelSpec> best;
  for (uint32_t h : {8192u, 6144u, 5120u, 4096u, 3072u, 2048u, 1536u, 1024u, 768u, 512u, 384u, 256u, 128u, 64u}) {
    ExampleModelSpec s = shape_for_width(h, dtype, target, seed, mix);
    const double err = std::fabs(static_cast<double>(estimate_bytes(s)) - static_cast<double>(target)) / target;
    if (err <= 0.04 && s.n_layers >= 8) return s;
    if (err <= 0.04 && !best) best = s;
  }
  if (best) return *best;
  return Status::InvalidArgument(
      fmt::format("cannot build an example model within 5% of {} bytes (the smallest is about {} bytes)", target,
                  estimate_bytes(shape_for_width(64, dtype, 0, seed, mix))));
}

Result<GgufWriter> example_model_layout(const ExampleModelSpec& s) {
  LS_RETURN_IF_ERROR(validate_example_spec(s));
  GgufWriter w(s.alignment);
  const std::string a = example_file_arch(s);
  auto u32 = [&](const std::string& k, uint32_t v) { return w.add(k, GgufValue::u32(v)); };
  LS_RETURN_IF_ERROR(w.add("general.architecture", GgufValue::string(a)));
  LS_RETURN_IF_ERROR(w.add("general.name", GgufValue::string("layerstream example model")));
  LS_RETURN_IF_ERROR(u32("general.file_type", llama_file_type(s)));
  if (ggml_type_traits(s.dtype).block_elems > 1) LS_RETURN_IF_ERROR(u32("general.quantization_version", 2));
  LS_RETURN_IF_ERROR(w.add("layerstream.example.seed", GgufValue::u64(s.seed)));
  LS_RETURN_IF_ERROR(u32(a + ".context_length", s.n_ctx));
  LS_RETURN_IF_ERROR(u32(a + ".embedding_length", s.n_embd));
  LS_RETURN_IF_ERROR(u32(a + ".block_count", s.n_layers));
  LS_RETURN_IF_ERROR(u32(a + ".feed_forward_length", s.n_ff));
  if (s.n_expert > 0) {
    LS_RETURN_IF_ERROR(u32(a + ".expert_count", s.n_expert));
    LS_RETURN_IF_ERROR(u32(a + ".expert_used_count", s.n_expert_used));
    if (a == "qwen3moe" || a == "gpt-oss") LS_RETURN_IF_ERROR(u32(a + ".expert_feed_forward_length", s.n_ff));
  }
  LS_RETURN_IF_ERROR(u32(a + ".rope.dimension_count", head_dim(s)));
  LS_RETURN_IF_ERROR(u32(a + ".attention.head_count", s.n_head));
  LS_RETURN_IF_ERROR(u32(a + ".attention.head_count_kv", s.n_head_kv));
  if (s.head_dim) {
    LS_RETURN_IF_ERROR(u32(a + ".attention.key_length", s.head_dim));
    LS_RETURN_IF_ERROR(u32(a + ".attention.value_length", s.head_dim));
  }
  if (sliding_window(s)) {
    LS_RETURN_IF_ERROR(u32(a + ".attention.sliding_window", sliding_window(s)));
    // gpt-oss: llama.cpp's fixed pattern, every other layer local
    if (a != "gpt-oss") LS_RETURN_IF_ERROR(u32(a + ".attention.sliding_window_pattern", s.swa_pattern));
  }
  LS_RETURN_IF_ERROR(w.add(a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(1e-5f)));
  // qwen3 / gemma3 use a large global base (gemma3's local layers keep the default 10000).
  LS_RETURN_IF_ERROR(w.add(a + ".rope.freq_base", GgufValue::f32(a == "llama" ? 10000.0f : 1e6f)));
  LS_RETURN_IF_ERROR(u32(a + ".vocab_size", s.n_vocab));
  LS_ASSIGN_OR_RETURN(TokenizerVocab vocab, try_make_example_vocab(s.n_vocab));
  LS_RETURN_IF_ERROR(add_tokenizer_metadata(w, vocab));
  for (auto& t : tensor_decls(s)) LS_RETURN_IF_ERROR(w.add_tensor(t.name, t.dims, t.type));
  return w;
}

Status write_example_model(const std::string& path, const ExampleModelSpec& spec, const ExampleWriteOptions& opt) {
  LS_ASSIGN_OR_RETURN(GgufWriter w, example_model_layout(spec));
  unsigned threads = opt.threads ? opt.threads : std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  // Each chunk is a whole number of rows, ~1M elements, seeded by (seed,
  // tensor, chunk) so the bytes do not depend on the thread count.
  constexpr uint64_t kChunkElems = uint64_t{1} << 20;
  struct Scratch {
    std::vector<float> f;
    std::vector<uint8_t> out;
    Status status;
  };
  std::vector<Scratch> scratch(threads);

  auto fill = [&](size_t ti, const GgufTensorInfo& t, TensorSink& sink) -> Status {
    const GgmlTypeTraits tr = ggml_type_traits(t.type);
    const uint64_t row = t.dims[0];
    const uint64_t rows = t.n_elements() / row;
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkElems / row);
    const uint64_t n_chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
    const uint64_t row_bytes = ggml_row_bytes(tr, row);
    const Dist dist = dist_for(t.name, spec);
    const uint64_t tensor_seed = splitmix64(spec.seed ^ splitmix64(ti + 1));
    auto make_chunk = [&](uint64_t c, Scratch& sc) {
      const uint64_t r0 = c * rows_per_chunk, r1 = std::min(rows, r0 + rows_per_chunk);
      sc.f.resize(row);
      sc.out.resize((r1 - r0) * row_bytes);
      Xoshiro256 rng(tensor_seed ^ splitmix64(c));
      for (uint64_t r = r0; r < r1; ++r) {
        for (uint64_t j = 0; j < row; ++j) sc.f[j] = dist.center + dist.amp * rng.symmetric();
        sc.status = math::encode_row(t.type, sc.f.data(), row, sc.out.data() + (r - r0) * row_bytes);
        if (!sc.status.ok()) return;
      }
    };
    for (uint64_t c0 = 0; c0 < n_chunks; c0 += threads) {
      if (opt.cancel && opt.cancel->load()) return Status::Cancelled("writing " + path + " was interrupted");
      const uint64_t batch = std::min<uint64_t>(threads, n_chunks - c0);
      if (batch == 1) {
        make_chunk(c0, scratch[0]);
      } else {
        std::vector<std::thread> pool;
        for (uint64_t k = 0; k < batch; ++k) pool.emplace_back([&, k] { make_chunk(c0 + k, scratch[k]); });
        for (auto& th : pool) th.join();
      }
      for (uint64_t k = 0; k < batch; ++k) {
        LS_RETURN_IF_ERROR(scratch[k].status);
        LS_RETURN_IF_ERROR(sink.write(scratch[k].out.data(), scratch[k].out.size()));
      }
    }
    return Status::OK();
  };
  GgufWriter::WriteOptions wo;
  wo.cancel = opt.cancel;
  wo.progress = opt.progress;
  wo.fsync = opt.fsync;
  return w.write(path, fill, wo);
}

}  // namespace layerstream

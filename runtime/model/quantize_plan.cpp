#include "runtime/model/quantize_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace layerstream {
namespace {

using FT = LlamaFileType;

struct FileTypeName {
  const char* name;
  FT ft;
  GgmlType base;
};

constexpr std::array<FileTypeName, 19> kFileTypes{{
    {"Q4_K_M", FT::kQ4_K_M, GgmlType::Q4_K}, {"Q4_K_S", FT::kQ4_K_S, GgmlType::Q4_K},
    {"Q5_K_M", FT::kQ5_K_M, GgmlType::Q5_K}, {"Q5_K_S", FT::kQ5_K_S, GgmlType::Q5_K},
    {"Q3_K_S", FT::kQ3_K_S, GgmlType::Q3_K}, {"Q3_K_M", FT::kQ3_K_M, GgmlType::Q3_K},
    {"Q3_K_L", FT::kQ3_K_L, GgmlType::Q3_K}, {"Q2_K", FT::kQ2_K, GgmlType::Q2_K},
    {"Q6_K", FT::kQ6_K, GgmlType::Q6_K},     {"Q8_0", FT::kQ8_0, GgmlType::Q8_0},
    {"Q4_0", FT::kQ4_0, GgmlType::Q4_0},     {"Q4_1", FT::kQ4_1, GgmlType::Q4_1},
    {"Q5_0", FT::kQ5_0, GgmlType::Q5_0},     {"Q5_1", FT::kQ5_1, GgmlType::Q5_1},
    {"IQ4_NL", FT::kIQ4_NL, GgmlType::IQ4_NL}, {"IQ4_XS", FT::kIQ4_XS, GgmlType::IQ4_XS},
    {"F16", FT::kF16, GgmlType::F16},        {"BF16", FT::kBF16, GgmlType::BF16},
    {"F32", FT::kF32, GgmlType::F32},
}};

// Types layerstream encodes that are no llama.cpp file type of their own:
// every matrix at that type (general.file_type of the nearest mix).
constexpr std::array<FileTypeName, 3> kPlainTypes{{
    {"Q3_K", FT::kQ3_K_S, GgmlType::Q3_K}, {"Q4_K", FT::kQ4_K_S, GgmlType::Q4_K}, {"Q5_K", FT::kQ5_K_S, GgmlType::Q5_K},
}};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

bool is_quantized(GgmlType t) { return t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16; }

// llama.cpp's tensor categories (by name).
enum class Category { kOutput, kTokenEmbd, kAttnQkv, kAttnKvB, kAttnV, kAttnK, kAttnQ, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOther };

Category category_of(std::string_view n) {
  if (n == "output.weight") return Category::kOutput;
  if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Category::kTokenEmbd;
  if (contains(n, "attn_qkv.weight")) return Category::kAttnQkv;
  if (contains(n, "attn_kv_b.weight")) return Category::kAttnKvB;
  if (contains(n, "attn_v.weight")) return Category::kAttnV;
  if (contains(n, "attn_k.weight")) return Category::kAttnK;
  if (contains(n, "attn_q.weight")) return Category::kAttnQ;
  if (contains(n, "attn_output.weight")) return Category::kAttnOutput;
  if (contains(n, "ffn_up")) return Category::kFfnUp;
  if (contains(n, "ffn_gate")) return Category::kFfnGate;
  if (contains(n, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool is_attn_v_like(Category c) { return c == Category::kAttnV || c == Category::kAttnQkv || c == Category::kAttnKvB; }

// The layers that get more bits in the _M mixes: the first and last eighth
// and every third layer between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The model facts llama.cpp's rules read, and its running counters.
struct RuleState {
  std::string arch;
  int n_layer = 0;
  int n_gqa = 1;
  int n_expert = 0;
  bool tied_embeddings = true;
  int n_attention_wv = 0;
  int i_attention_wv = 0;
  int i_ffn_down = 0;
  bool has_imatrix = false;
  bool falcon() const { return arch == "falcon"; }
};

// The layer of "blk.N. ..." tensors, else `counter`: llama.cpp counts the
// tensors of a kind in layer order, which is the file order only when the
// file lists blk.2 before blk.10 (many list blk.10 first).
int layer_of(std::string_view name, int counter) {
  if (name.rfind("blk.", 0) != 0) return counter;
  int layer = 0;
  size_t i = 4;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) layer = layer * 10 + (name[i] - '0');
  return i > 4 && i < name.size() && name[i] == '.' ? layer : counter;
}

GgmlType rule_attn_v(RuleState& s, FT ft, GgmlType t, std::string_view name) {
  const int i = layer_of(name, s.i_attention_wv++);
  if (ft == FT::kQ2_K) t = s.n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
  else if (ft == FT::kQ3_K_M) t = i < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
  else if (ft == FT::kQ3_K_L) t = GgmlType::Q5_K;
  else if ((ft == FT::kIQ4_NL || ft == FT::kIQ4_XS) && s.n_gqa >= 4) t = GgmlType::Q5_K;
  else if ((ft == FT::kQ4_K_M || ft == FT::kQ5_K_M) && use_more_bits(i, s.n_attention_wv)) t = GgmlType::Q6_K;
  else if (ft == FT::kQ4_K_S && i < 4) t = GgmlType::Q5_K;
  if (s.n_expert == 8) t = GgmlType::Q8_0;
  return t;
}

GgmlType rule_ffn_down(RuleState& s, FT ft, GgmlType t, std::string_view name) {
  const int i = layer_of(name, s.i_ffn_down++);
  const int n = s.n_layer;
  const bool more = use_more_bits(i, n);
  if (ft == FT::kQ2_K) return GgmlType::Q3_K;
  if (ft == FT::kQ3_K_M) return i < n / 16 ? GgmlType::Q5_K : (!s.falcon() || more) ? GgmlType::Q4_K : GgmlType::Q3_K;
  if (ft == FT::kQ3_K_L) return s.falcon() ? GgmlType::Q4_K : GgmlType::Q5_K;
  if (ft == FT::kQ4_K_M) {
    if (s.falcon()) return i < n / 16 ? GgmlType::Q6_K : more ? GgmlType::Q5_K : GgmlType::Q4_K;
    return more ? GgmlType::Q6_K : t;
  }
  if (i < n / 8 && (ft == FT::kIQ4_NL || ft == FT::kIQ4_XS) && !s.has_imatrix) return GgmlType::Q5_K;
  if (ft == FT::kQ5_K_M && more) return GgmlType::Q6_K;
  if (ft == FT::kQ4_K_S && !s.falcon() && i < n / 8) return GgmlType::Q5_K;
  if ((ft == FT::kQ4_0 || ft == FT::kQ5_0) && s.has_imatrix && i < n / 8) {
    return ft == FT::kQ4_0 ? GgmlType::Q4_1 : GgmlType::Q5_1;
  }
  return t;
}

GgmlType rule_attn_output(const RuleState& s, FT ft, GgmlType t) {
  if (s.falcon()) return ft == FT::kQ3_K_L ? GgmlType::Q4_K : t;
  if (s.n_expert == 8) {
    const bool low = ft == FT::kQ2_K || ft == FT::kQ3_K_S || ft == FT::kQ3_K_M || ft == FT::kIQ4_NL ||
                     ft == FT::kQ4_K_S || ft == FT::kQ4_K_M || ft == FT::kIQ4_XS;
    return low ? GgmlType::Q5_K : t;
  }
  if (ft == FT::kQ2_K) return GgmlType::Q3_K;
  if (ft == FT::kQ3_K_M) return GgmlType::Q4_K;
  if (ft == FT::kQ3_K_L) return GgmlType::Q5_K;
  return t;
}

// llama_tensor_get_type_impl for the file types we make.
GgmlType rule_type(RuleState& s, FT ft, GgmlType t, const GgufTensorInfo& info) {
  const Category c = category_of(info.name);
  if (c == Category::kOutput || (s.tied_embeddings && c == Category::kTokenEmbd)) {
    // The output matrix (or the embeddings that double as it) keeps 6 bits,
    // 8 where a 256-element block does not fit its rows.
    if (s.falcon() || info.dims[0] % ggml_type_traits(t).block_elems != 0) return GgmlType::Q8_0;
    return t != GgmlType::Q8_0 ? GgmlType::Q6_K : t;
  }
  if (c == Category::kTokenEmbd) return t;
  if (is_attn_v_like(c)) return rule_attn_v(s, ft, t, info.name);
  if (c == Category::kAttnK) return s.n_expert == 8 ? GgmlType::Q8_0 : t;
  if (c == Category::kFfnDown) return rule_ffn_down(s, ft, t, info.name);
  if (c == Category::kAttnOutput) return rule_attn_output(s, ft, t);
  return t;
}

int meta_int(const GgufFile& f, const std::string& key, int fallback) {
  auto v = f.get_u32_or(key, static_cast<uint32_t>(fallback));
  return v.ok() ? static_cast<int>(*v) : fallback;
}

RuleState rule_state(const QuantModelFacts& m, std::span<const GgufTensorInfo> tensors, const PlanOptions& o) {
  RuleState s;
  s.arch = m.arch;
  s.n_layer = m.n_layer;
  s.n_gqa = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 1;
  s.n_expert = m.n_expert;
  s.has_imatrix = o.has_imatrix;
  for (const auto& t : tensors) {
    if (t.name == "output.weight") s.tied_embeddings = false;
    if (is_attn_v_like(category_of(t.name))) ++s.n_attention_wv;
  }
  return s;
}

}  // namespace

std::optional<QuantTarget> parse_quant_target(std::string_view name) {
  for (const auto& f : kFileTypes) {
    if (iequals(name, f.name)) return QuantTarget{f.name, f.base, static_cast<uint32_t>(f.ft), true};
  }
  for (const auto& f : kPlainTypes) {
    if (iequals(name, f.name)) return QuantTarget{f.name, f.base, static_cast<uint32_t>(f.ft), false};
  }
  return std::nullopt;
}

std::string quant_target_names() {
  std::string s;
  for (const auto& f : kFileTypes) s += (s.empty() ? "" : ", ") + std::string(f.name);
  for (const auto& f : kPlainTypes) s += ", " + std::string(f.name);
  return s;
}

GgmlType quant_fallback_type(GgmlType t, uint64_t ne0) {
  GgmlType f;
  switch (t) {
    case GgmlType::IQ4_XS: f = GgmlType::IQ4_NL; break;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K: f = GgmlType::Q4_0; break;
    case GgmlType::Q4_K: f = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: f = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: f = GgmlType::Q8_0; break;
    default: f = t; break;  // a 32-element type: nothing smaller to demote to
  }
  return ne0 % ggml_type_traits(f).block_elems == 0 ? f : GgmlType::F16;
}

bool tensor_is_quantizable(const GgufTensorInfo& info, std::string_view arch) {
  const std::string_view n = info.name;
  if (info.dims.size() < 2) return false;
  if (n.size() < 6 || n.substr(n.size() - 6) != "weight") return false;
  for (std::string_view part : {"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
                                "ssm_conv1d", "shortconv.conv.weight", "time_mix_", "attn_rel_b.weight",
                                ".position_embd", ".rel_pos", ".patch_embd", "indexer.k_proj.weight",
                                "indexer.q_proj.weight"}) {
    if (contains(n, part)) return false;
  }
  return n != "position_embd.weight" && n != "token_types.weight";
}

QuantModelFacts quant_model_facts(const GgufFile& f) {
  QuantModelFacts m;
  if (auto arch = f.get_string_or("general.architecture", ""); arch.ok()) m.arch = *arch;
  m.n_layer = meta_int(f, m.arch + ".block_count", 0);
  m.n_head = meta_int(f, m.arch + ".attention.head_count", 0);
  m.n_head_kv = meta_int(f, m.arch + ".attention.head_count_kv", m.n_head);
  m.n_expert = meta_int(f, m.arch + ".expert_count", 0);
  return m;
}

Result<std::vector<TensorPlan>> plan_quantization(const GgufFile& file, const QuantTarget& target,
                                                  const PlanOptions& options) {
  return plan_quantization(quant_model_facts(file), file.tensors(), target, options);
}

Result<std::vector<TensorPlan>> plan_quantization(const QuantModelFacts& facts,
                                                  std::span<const GgufTensorInfo> tensors,
                                                  const QuantTarget& target, const PlanOptions& options) {
  RuleState state = rule_state(facts, tensors, options);
  const auto ft = static_cast<FT>(target.file_type);
  std::vector<TensorPlan> plan;
  plan.reserve(tensors.size());
  for (const auto& info : tensors) {
    TensorPlan p{info.type};
    if (tensor_is_quantizable(info, state.arch)) {
      GgmlType t = target.base;
      if (is_quantized(t)) {
        if (target.mix && !options.pure) t = rule_type(state, ft, t, info);
        const uint32_t block = ggml_type_traits(t).block_elems;
        if (info.dims[0] % block != 0) {
          if (options.pure || !target.mix) {
            return Status::InvalidArgument(fmt::format(
                "tensor '{}' {}: {} cannot hold rows of {} elements (its blocks are {} elements); "
                "choose a mix such as q4_k_m, whose fallback picks a type that fits",
                info.name, info.shape_string(), ggml_type_traits(t).name, info.dims[0], block));
          }
          t = quant_fallback_type(t, info.dims[0]);
          p.fallback = true;
        }
      }
      p.type = t;
    }
    p.convert = p.type != info.type;
    plan.push_back(p);
  }
  return plan;
}

}  // namespace layerstream

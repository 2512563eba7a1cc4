#include "runtime/model/model_shape.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <vector>

#include "runtime/core/status_macros.h"
#include "runtime/model/byte_source.h"
#include "runtime/model/gguf_writer.h"

namespace layerstream {
namespace {

// The header's bytes, then zeros to the file's size (the tensor data that is
// never read).
class HeaderOnlySource final : public ByteSource {
 public:
  HeaderOnlySource(std::vector<uint8_t> header, uint64_t size, std::string name)
      : header_(std::move(header)), size_(size), name_(std::move(name)) {}
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    if (offset > size_ || n > size_ - offset)
      return Status::Corruption(fmt::format("{}: read of {} bytes at {} is past the end ({})", name_, n, offset, size_));
    auto* out = static_cast<uint8_t*>(dst);
    std::memset(out, 0, n);
    if (offset < header_.size()) std::memcpy(out, header_.data() + offset, std::min<uint64_t>(n, header_.size() - offset));
    return Status::OK();
  }

 private:
  std::vector<uint8_t> header_;
  uint64_t size_;
  std::string name_;
};

struct Preset {
  const char* name;
  uint32_t layers, hidden, ffn, heads, kv_heads, vocab, ctx;
  ExampleMix mix;
  const char* arch = "llama";
  uint32_t experts = 0, experts_used = 0, head_dim = 0;  // ffn: each expert's width when experts > 0
};
// Qwen3-30B-A3B: its config.json (num_hidden_layers 48, hidden_size 2048,
// num_attention_heads 32, num_key_value_heads 4, head_dim 128, num_experts
// 128, num_experts_per_tok 8, moe_intermediate_size 768, vocab_size 151936,
// max_position_embeddings 40960, every layer sparse, untied output).
constexpr Preset kPresets[] = {
    {"llama-70b-q4_k_m", 80, 8192, 28672, 64, 8, 128256, 8192, ExampleMix::kQ4_K_M},
    {"llama-8b-q4_k_m", 32, 4096, 14336, 32, 8, 128256, 8192, ExampleMix::kQ4_K_M},
    {"qwen3-30b-a3b-q4_k_m", 48, 2048, 768, 32, 4, 151936, 40960, ExampleMix::kQ4_K_M, "qwen3moe", 128, 8, 128},
};
constexpr const char* kKeys = "layers, hidden, ffn, heads, kv_heads, head_dim, vocab, ctx, dtype, tied, arch, experts, "
                              "experts_used, expert_ffn";

Result<uint32_t> parse_u32(std::string_view key, std::string_view v) {
  uint32_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty())
    return Status::InvalidArgument(fmt::format("shape: {}={} is not a non-negative integer", key, v));
  return out;
}

}  // namespace

Result<ExampleModelSpec> parse_model_shape(std::string_view text) {
  ExampleModelSpec s;
  s.mix = ExampleMix::kUniform;
  s.dtype = GgmlType::F16;
  bool first = true;
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      const Preset* found = nullptr;
      for (const Preset& p : kPresets)
        if (item == p.name) found = &p;
      if (!first || !found) {
        std::string names;
        for (const Preset& p : kPresets) names += std::string(names.empty() ? "" : ", ") + p.name;
        return Status::InvalidArgument(
            fmt::format("shape: '{}' is not a preset ({}, first) or key=value ({})", item, names, kKeys));
      }
      s.n_layers = found->layers;
      s.n_embd = found->hidden;
      s.n_ff = found->ffn;
      s.n_head = found->heads;
      s.n_head_kv = found->kv_heads;
      s.n_vocab = found->vocab;
      s.n_ctx = found->ctx;
      s.mix = found->mix;
      s.dtype = example_mix_base(found->mix);
      s.arch = found->arch;
      s.n_expert = found->experts;
      s.n_expert_used = found->experts_used;
      s.head_dim = found->head_dim;
      first = false;
      continue;
    }
    first = false;
    const std::string_view key = item.substr(0, eq), v = item.substr(eq + 1);
    if (key == "dtype") {
      const std::optional<ExampleMix> mix = parse_example_mix(v);
      const std::optional<GgmlType> t = mix ? std::optional<GgmlType>(example_mix_base(*mix)) : parse_ggml_type(v);
      if (!t) return Status::InvalidArgument(fmt::format("shape: dtype={} is not a matrix type or a mix (q4_k_m ...)", v));
      s.dtype = *t;
      s.mix = mix.value_or(ExampleMix::kUniform);
      continue;
    }
    if (key == "arch") {
      s.arch = std::string(v);  // validate_example_spec names the ones it knows
      continue;
    }
    // A mixture of experts' FFN width is each expert's (the example model's n_ff).
    uint32_t* field = key == "layers"                        ? &s.n_layers
                      : key == "hidden"                      ? &s.n_embd
                      : key == "ffn" || key == "expert_ffn"  ? &s.n_ff
                      : key == "heads"                       ? &s.n_head
                      : key == "kv_heads"                    ? &s.n_head_kv
                      : key == "head_dim"                    ? &s.head_dim
                      : key == "vocab"                       ? &s.n_vocab
                      : key == "ctx"                         ? &s.n_ctx
                      : key == "experts"                     ? &s.n_expert
                      : key == "experts_used"                ? &s.n_expert_used
                                                             : nullptr;
    if (key == "tied") {
      LS_ASSIGN_OR_RETURN(uint32_t t, parse_u32(key, v));
      s.tied_output = t != 0;
      continue;
    }
    if (!field)
      return Status::InvalidArgument(fmt::format("shape: unknown key '{}' ({})", key, kKeys));
    LS_ASSIGN_OR_RETURN(*field, parse_u32(key, v));
  }
  if (Status st = validate_example_spec(s); !st.ok()) return st.WithContext(fmt::format("shape '{}'", text));
  return s;
}

Result<GgufFile> model_shape_file(const ExampleModelSpec& spec, const std::string& name) {
  LS_ASSIGN_OR_RETURN(GgufWriter w, example_model_layout(spec));
  HeaderOnlySource src(w.header(), w.file_size(), name);
  return read_gguf(src);
}

}  // namespace layerstream

// A raw GGUF file builder for tests: unlike GgufWriter it can express every
// invalid file (bad types, lying dims, overlapping offsets), and it records
// where each structural field lies so tests can truncate or patch there.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/math/ggml_type.h"

namespace layerstream::testing {

struct RawKv {
  std::string key;
  uint32_t type;               // GGUF value type id
  std::vector<uint8_t> value;  // encoded value (without the type id)
};

struct RawTensor {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type = 0;                       // ggml type id
  std::optional<uint64_t> offset;          // relative offset; default: packed, aligned
};

// Offsets of structural boundaries in the built file.
struct Layout {
  std::vector<uint64_t> kv_starts;      // start of each key/value pair
  std::vector<uint64_t> tensor_starts;  // start of each tensor info
  uint64_t infos_end = 0;               // end of the last tensor info
  uint64_t data_offset = 0;
  std::vector<uint64_t> tensor_data;    // absolute offset of each tensor's data
  std::vector<uint64_t> tensor_bytes;
};

class GgufBuilder {
 public:
  uint32_t magic = 0x46554747, version = 3;
  uint32_t alignment = 32;  // used for layout; add the key yourself if != 32
  std::vector<RawKv> kvs;
  std::vector<RawTensor> tensors;
  std::optional<uint64_t> n_tensors_override, n_kv_override;
  static constexpr uint64_t kSane = uint64_t{1} << 28;

  template <typename T>
  static void put(std::vector<uint8_t>& out, T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  static std::vector<uint8_t> str(const std::string& s) {
    std::vector<uint8_t> out;
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
    return out;
  }
  void add_u32(const std::string& k, uint32_t v) { std::vector<uint8_t> b; put(b, v); kvs.push_back({k, 4, b}); }
  void add_i32(const std::string& k, int32_t v) { std::vector<uint8_t> b; put(b, v); kvs.push_back({k, 5, b}); }
  void add_f32(const std::string& k, float v) { std::vector<uint8_t> b; put(b, v); kvs.push_back({k, 6, b}); }
  void add_str(const std::string& k, const std::string& v) { kvs.push_back({k, 8, str(v)}); }
  void add_str_array(const std::string& k, const std::vector<std::string>& v) {
    std::vector<uint8_t> b;
    put<uint32_t>(b, 8);
    put<uint64_t>(b, v.size());
    for (const auto& s : v) { auto e = str(s); b.insert(b.end(), e.begin(), e.end()); }
    kvs.push_back({k, 9, b});
  }
  void set(const std::string& k, uint32_t type, std::vector<uint8_t> v) {
    for (auto& kv : kvs) if (kv.key == k) { kv.type = type; kv.value = std::move(v); return; }
    kvs.push_back({k, type, std::move(v)});
  }
  void erase_kv(const std::string& k) { std::erase_if(kvs, [&](const RawKv& kv) { return kv.key == k; }); }
  void erase_tensor(const std::string& n) { std::erase_if(tensors, [&](const RawTensor& t) { return t.name == n; }); }
  RawTensor* tensor(const std::string& n) {
    for (auto& t : tensors) if (t.name == n) return &t;
    return nullptr;
  }

  static uint64_t tensor_bytes(const RawTensor& t) {
    auto tr = ggml_type_traits(t.type);
    if (!tr) return 0;
    unsigned __int128 n = 1;
    for (uint64_t d : t.dims) n = std::min<unsigned __int128>(n * d, uint64_t{1} << 40);
    return static_cast<uint64_t>(n / tr->block_elems * tr->block_bytes);
  }

  // Builds the file; data bytes are random from `rng`, except F32 tensors
  // that get values in [0.5, 1.5) (valid norms).
  std::vector<uint8_t> build(std::mt19937_64& rng, Layout* layout = nullptr) const {
    Layout l;
    std::vector<uint8_t> out;
    put(out, magic);
    put(out, version);
    put<uint64_t>(out, n_tensors_override.value_or(tensors.size()));
    put<uint64_t>(out, n_kv_override.value_or(kvs.size()));
    for (const auto& kv : kvs) {
      l.kv_starts.push_back(out.size());
      auto k = str(kv.key);
      out.insert(out.end(), k.begin(), k.end());
      put(out, kv.type);
      out.insert(out.end(), kv.value.begin(), kv.value.end());
    }
    uint64_t next = 0;
    std::vector<uint64_t> rel;
    for (const auto& t : tensors) {
      l.tensor_starts.push_back(out.size());
      auto n = str(t.name);
      out.insert(out.end(), n.begin(), n.end());
      put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) put(out, d);
      put(out, t.type);
      const uint64_t off = t.offset.value_or(next);
      rel.push_back(off);
      put(out, off);
      // Lying offsets and sizes do not grow the file (it stays small).
      if (off < kSane && tensor_bytes(t) < kSane) {
        next = std::max(next, (off + tensor_bytes(t) + alignment - 1) / alignment * alignment);
      }
    }
    l.infos_end = out.size();
    l.data_offset = (out.size() + alignment - 1) / alignment * alignment;
    out.resize(l.data_offset + next, 0);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const uint64_t at = l.data_offset + rel[i], n = tensor_bytes(tensors[i]);
      l.tensor_data.push_back(at);
      l.tensor_bytes.push_back(n);
      if (rel[i] >= kSane || n >= kSane || at + n > out.size()) continue;
      if (tensors[i].type == 0) {
        std::uniform_real_distribution<float> u(0.5f, 1.5f);
        for (uint64_t j = 0; j + 4 <= n; j += 4) { float f = u(rng); std::memcpy(&out[at + j], &f, 4); }
      } else {
        for (uint64_t j = 0; j < n; ++j) out[at + j] = static_cast<uint8_t>(rng());
        if (tensors[i].type == 1 || tensors[i].type == 30) {  // keep f16/bf16 finite: clear exponent top bit
          for (uint64_t j = 1; j < n; j += 2) out[at + j] &= 0x3F;
        }
      }
    }
    if (layout) *layout = l;
    return out;
  }
};

// A valid small Llama model (F16 matrices, F32 norms, a 512-token vocab).
inline GgufBuilder llama_builder(uint32_t n_layers = 2, uint32_t e = 64, uint32_t ff = 128, uint32_t heads = 4,
                                 uint32_t kv_heads = 2, uint32_t vocab = 512, const std::string& arch = "llama") {
  GgufBuilder b;
  b.add_str("general.architecture", arch);
  b.add_u32(arch + ".block_count", n_layers);
  b.add_u32(arch + ".embedding_length", e);
  b.add_u32(arch + ".feed_forward_length", ff);
  b.add_u32(arch + ".attention.head_count", heads);
  b.add_u32(arch + ".attention.head_count_kv", kv_heads);
  b.add_u32(arch + ".context_length", 256);
  b.add_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  b.add_f32(arch + ".rope.freq_base", 10000.0f);
  b.add_str("tokenizer.ggml.model", "llama");
  std::vector<std::string> toks;
  for (uint32_t i = 0; i < vocab; ++i) toks.push_back("t" + std::to_string(i));
  b.add_str_array("tokenizer.ggml.tokens", toks);
  b.add_u32("tokenizer.ggml.bos_token_id", 1);
  b.add_u32("tokenizer.ggml.eos_token_id", 2);
  const uint64_t kv = uint64_t{kv_heads} * (e / heads);
  b.tensors.push_back({"token_embd.weight", {e, vocab}, 1});
  for (uint32_t i = 0; i < n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.tensors.push_back({p + "attn_norm.weight", {e}, 0});
    b.tensors.push_back({p + "attn_q.weight", {e, e}, 1});
    b.tensors.push_back({p + "attn_k.weight", {e, kv}, 1});
    b.tensors.push_back({p + "attn_v.weight", {e, kv}, 1});
    b.tensors.push_back({p + "attn_output.weight", {e, e}, 1});
    b.tensors.push_back({p + "ffn_norm.weight", {e}, 0});
    b.tensors.push_back({p + "ffn_gate.weight", {e, ff}, 1});
    b.tensors.push_back({p + "ffn_up.weight", {e, ff}, 1});
    b.tensors.push_back({p + "ffn_down.weight", {ff, e}, 1});
  }
  b.tensors.push_back({"output_norm.weight", {e}, 0});
  b.tensors.push_back({"output.weight", {e, vocab}, 1});
  return b;
}

// A mixture of experts (arch qwen3moe, or llama for Mixtral): llama_builder's
// file with each block's dense FFN replaced by a router and 3-D expert
// tensors of n_expert experts, ff wide, and the expert keys (qwen3moe: and
// its QK norms).
inline GgufBuilder moe_builder(const std::string& arch, uint32_t n_expert, uint32_t n_used, uint32_t n_layers = 2,
                               uint32_t e = 64, uint32_t ff = 32, uint32_t vocab = 512) {
  GgufBuilder b = llama_builder(n_layers, e, ff, 4, 2, vocab, arch);
  b.add_u32(arch + ".expert_count", n_expert);
  b.add_u32(arch + ".expert_used_count", n_used);
  if (arch == "qwen3moe") b.add_u32(arch + ".expert_feed_forward_length", ff);
  std::vector<RawTensor> ts;
  for (const RawTensor& t : b.tensors) {
    const bool dense_ffn = t.name.find(".ffn_gate.") != std::string::npos ||
                           t.name.find(".ffn_up.") != std::string::npos || t.name.find(".ffn_down.") != std::string::npos;
    if (!dense_ffn) ts.push_back(t);
  }
  for (uint32_t i = 0; i < n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    if (arch == "qwen3moe") {
      ts.push_back({p + "attn_q_norm.weight", {e / 4}, 0});
      ts.push_back({p + "attn_k_norm.weight", {e / 4}, 0});
    }
    ts.push_back({p + "ffn_gate_inp.weight", {e, n_expert}, 0});
    ts.push_back({p + "ffn_gate_exps.weight", {e, ff, n_expert}, 8});  // Q8_0
    ts.push_back({p + "ffn_up_exps.weight", {e, ff, n_expert}, 8});
    ts.push_back({p + "ffn_down_exps.weight", {ff, e, n_expert}, 8});
  }
  b.tensors = std::move(ts);
  return b;
}

// A gpt-oss file: moe_builder's plus the sliding window, the expert width,
// the FFN norm as post_attention_norm, the attention output's bias, the
// sinks, and the router's and experts' biases (all F32).
inline GgufBuilder gpt_oss_builder(uint32_t n_expert, uint32_t n_used, uint32_t n_layers = 2, uint32_t e = 64,
                                   uint32_t ff = 32) {
  GgufBuilder b = moe_builder("gpt-oss", n_expert, n_used, n_layers, e, ff);
  b.add_u32("gpt-oss.expert_feed_forward_length", ff);
  b.add_u32("gpt-oss.attention.sliding_window", 128);
  for (RawTensor& t : b.tensors) {
    if (t.name.ends_with(".ffn_norm.weight")) t.name.replace(t.name.find("ffn_norm"), 8, "post_attention_norm");
  }
  for (uint32_t i = 0; i < n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.tensors.push_back({p + "attn_output.bias", {e}, 0});
    b.tensors.push_back({p + "attn_sinks.weight", {4}, 0});  // one per head
    b.tensors.push_back({p + "ffn_gate_inp.bias", {n_expert}, 0});
    b.tensors.push_back({p + "ffn_gate_exps.bias", {ff, n_expert}, 0});
    b.tensors.push_back({p + "ffn_up_exps.bias", {ff, n_expert}, 0});
    b.tensors.push_back({p + "ffn_down_exps.bias", {e, n_expert}, 0});
  }
  return b;
}

}  // namespace layerstream::testing

// `layerstream inspect FILE`: validates a GGUF model and prints its
// architecture, hyper-parameters, tensor types, per-layer bytes and tokenizer.
// A well-formed file that layerstream cannot run (a tensor type it does not
// compute with, an architecture it does not know) is still shown, with what
// is unsupported, and exits 0; `run` refuses it with the same reason.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "examples/cli/cli_common.h"
#include "layerstream/units.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/tokenizer_gguf.h"

namespace layerstream::cli {
namespace {

// Bytes of one expert of a mixture-of-experts block: its gate, up and down slices (0 for a dense block).
uint64_t expert_bytes(const LlamaBlock& b) {
  if (!b.moe) return 0;
  return expert_slice(b.moe->gate_exps, 0).bytes + expert_slice(b.moe->up_exps, 0).bytes +
         expert_slice(b.moe->down_exps, 0).bytes;
}

const char* kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::kEmbedding: return "embedding";
    case LayerKind::kBlock: return "block";
    case LayerKind::kHead: return "head";
  }
  return "?";
}

class InspectCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    sub.add_option("file", path_, "GGUF model file")->required();
    add_json_flag(sub, json_path_);
    sub.add_flag("--metadata", show_metadata_, "Also list every metadata key");
  }

  int run() override {
    GgufReadOptions ro;
    ro.allow_unsupported_types = true;
    auto file = read_gguf_file(path_, ro);
    if (!file.ok()) return fail(file.status());
    auto model = load_llama_model(*file);
    // Unsupported (type, architecture, rope scaling): shown below; anything else is a bad file.
    if (!model.ok() && !model.status().IsUnsupported()) return fail(model.status());
    std::string tokenizer_kind = "none";
    uint64_t n_tokens = 0;
    if (auto vocab = read_tokenizer_vocab(*file); vocab.ok()) {
      tokenizer_kind = vocab->model;
      n_tokens = vocab->tokens.size();
    } else if (!vocab.status().IsNotFound()) {
      return fail(vocab.status());
    }
    std::map<std::string, std::pair<uint64_t, uint64_t>> types;  // name -> (count, bytes)
    std::set<std::string> unsupported_types;
    for (const auto& t : file->tensors()) {
      const GgmlTypeTraits tr = ggml_type_traits(t.type);
      auto& e = types[tr.name];
      e.first++;
      e.second += t.n_bytes;
      if (!tr.supported) unsupported_types.insert(tr.name);
    }
    std::printf("file:          %s (%s, GGUF v%u, alignment %u)\n", path_.c_str(),
                format_bytes(file->file_size()).c_str(), file->version(), file->alignment());
    if (!model.ok()) return show_unrunnable(*file, types, unsupported_types, model.status(), tokenizer_kind, n_tokens);
    const LlamaHparams& h = model->hparams;
    std::printf("architecture:  %s%s\n", h.arch.c_str(), h.rope_neox ? " (rope neox)" : "");
    std::printf("layers:        %u   hidden: %u   ffn: %u   heads: %u   kv heads: %u   head dim: %u\n", h.n_layers,
                h.n_embd, h.n_ff, h.n_head, h.n_head_kv, h.head_dim);
    if (h.is_moe()) {
      // One expert's gate, up and down slices: the unit a token's routing reads.
      uint64_t lo = UINT64_MAX, hi = 0, all = 0;
      for (const LlamaBlock& b : model->blocks) {
        lo = std::min(lo, expert_bytes(b));
        hi = std::max(hi, expert_bytes(b));
        all += expert_bytes(b) * h.n_expert;
      }
      std::printf("experts:       %u per block, %u used per token, width %u; %s per expert%s (%s of experts in all)\n",
                  h.n_expert, h.n_expert_used, h.n_ff_exp, format_bytes(lo).c_str(),
                  hi != lo ? (" to " + format_bytes(hi)).c_str() : "", format_bytes(all).c_str());
    }
    std::printf("vocab:         %u   context: %u   rms eps: %g   rope base: %g   rope scaling: %s x%g\n", h.n_vocab,
                h.n_ctx_train, h.rms_eps, h.rope_freq_base, h.rope_scaling_type.c_str(), h.rope_scaling_factor);
    {
      // What the architecture adds to the llama block (ArchTraits).
      const ArchTraits& t = h.traits;
      std::string extras;
      if (t.qk_norm) extras += " qk-norm";
      if (t.post_norms) extras += " post-norms";
      if (t.embed_scale) extras += " embedding-scale";
      if (t.ffn == FfnActivation::kGeluTanh) extras += " geglu";
      if (t.ffn == FfnActivation::kSwigluOai) extras += " swiglu-oai";
      if (t.gpt_oss) extras += " attention-sinks biases";
      if (model->rope_freqs) extras += " rope-freqs";
      int local = 0;
      for (uint32_t i = 0; i < h.n_layers; ++i) local += h.is_swa(i) ? 1 : 0;
      std::printf("attention:     scale %g", h.attn_scale);
      if (local) std::printf("   sliding window %u on %d/%u layers (rope base %g)", h.n_swa, local, h.n_layers,
                             h.rope_freq_base_swa);
      std::printf("%s%s\n", extras.empty() ? "" : "   block:", extras.c_str());
    }
    std::printf("tokenizer:     %s (%llu tokens)\n", tokenizer_kind.c_str(), static_cast<unsigned long long>(n_tokens));
    std::printf("output:        %s\n", model->output_tied ? "tied to token_embd" : "separate");
    std::printf("tensor types: ");
    for (const auto& [name, e] : types) {
      std::printf(" %s x%llu (%s)", name.c_str(), static_cast<unsigned long long>(e.first), format_bytes(e.second).c_str());
    }
    std::printf("\ntensor bytes:  %s (%llu)\n", format_bytes(model->total_tensor_bytes).c_str(),
                static_cast<unsigned long long>(model->total_tensor_bytes));
    if (!unsupported_types.empty()) {  // only in tensors the model does not use
      std::printf("unsupported:   tensor types %s (in tensors the model does not use)\n",
                  join(unsupported_types).c_str());
    }
    std::printf("%-10s %14s %14s %16s %14s\n", "layer", "tensor bytes", "span bytes", "span start", "aligned bytes");
    for (const auto& l : model->layers) {
      std::printf("%-10s %14llu %14llu %16llu %14llu\n", l.name.c_str(), static_cast<unsigned long long>(l.tensor_bytes),
                  static_cast<unsigned long long>(l.span_bytes()), static_cast<unsigned long long>(l.span_begin),
                  static_cast<unsigned long long>(l.aligned_bytes()));
    }
    if (show_metadata_) {
      for (const auto& kv : file->metadata()) std::printf("  %-48s %s\n", kv.key.c_str(), kv.value.to_string().c_str());
    }
    if (!json_path_.empty()) {
      nlohmann::json j = runnable_json(*file, *model, types, unsupported_types, tokenizer_kind, n_tokens);
      if (Status s = write_json_file(json_path_, j); !s.ok()) return fail(s);
    }
    return kExitOk;
  }

 private:
  // What `inspect --json` writes for a model layerstream runs.
  nlohmann::json runnable_json(const GgufFile& file, const LlamaModel& m,
                               const std::map<std::string, std::pair<uint64_t, uint64_t>>& types,
                               const std::set<std::string>& unsupported_types, const std::string& tokenizer_kind,
                               uint64_t n_tokens) const {
    const LlamaHparams& h = m.hparams;
    nlohmann::json j;
    j["path"] = path_;
    j["file_bytes"] = file.file_size();
    j["gguf_version"] = file.version();
    j["alignment"] = file.alignment();
    j["architecture"] = h.arch;
    j["hparams"] = {{"n_layers", h.n_layers},     {"n_embd", h.n_embd},         {"n_ff", h.n_ff},
                    {"n_head", h.n_head},         {"n_head_kv", h.n_head_kv},   {"head_dim", h.head_dim},
                    {"n_rot", h.n_rot},           {"n_vocab", h.n_vocab},       {"n_ctx_train", h.n_ctx_train},
                    {"rms_eps", h.rms_eps},       {"rope_freq_base", h.rope_freq_base},
                    {"rope_scaling_type", h.rope_scaling_type}, {"rope_scaling_factor", h.rope_scaling_factor},
                    {"rope_neox", h.rope_neox},   {"attn_scale", h.attn_scale},
                    {"sliding_window", h.n_swa},  {"rope_freq_base_swa", h.rope_freq_base_swa},
                    {"qk_norm", h.traits.qk_norm}, {"post_norms", h.traits.post_norms},
                    {"embed_scale", h.traits.embed_scale}, {"rope_freqs", m.rope_freqs.has_value()},
                    {"ffn_activation", h.traits.ffn == FfnActivation::kGeluTanh    ? "gelu_tanh"
                                       : h.traits.ffn == FfnActivation::kSwigluOai ? "swiglu_oai"
                                                                                    : "silu"},
                    {"attention_sinks", h.traits.gpt_oss}};
    if (h.is_moe()) {
      nlohmann::json per_block = nlohmann::json::array();
      for (const LlamaBlock& b : m.blocks) per_block.push_back(expert_bytes(b));
      j["experts"] = {{"count", h.n_expert},
                      {"used", h.n_expert_used},
                      {"n_ff_exp", h.n_ff_exp},
                      {"bytes_per_expert", per_block}};  // per block: one expert's gate + up + down slices
    }
    j["tokenizer"] = {{"model", tokenizer_kind}, {"tokens", n_tokens}};
    j["output_tied"] = m.output_tied;
    j["tensor_count"] = file.tensors().size();
    j["total_tensor_bytes"] = m.total_tensor_bytes;
    nlohmann::json jt = nlohmann::json::object();
    for (const auto& [name, e] : types) jt[name] = {{"count", e.first}, {"bytes", e.second}};
    j["tensor_types"] = jt;
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : m.layers) {
      nlohmann::json ranges = nlohmann::json::array();
      for (const auto& r : l.ranges) ranges.push_back({r.begin, r.end});
      layers.push_back({{"name", l.name},
                        {"kind", kind_name(l.kind)},
                        {"tensors", l.tensors.size()},
                        {"tensor_bytes", l.tensor_bytes},
                        {"span_begin", l.span_begin},
                        {"span_end", l.span_end},
                        {"aligned_begin", l.aligned_begin},
                        {"aligned_end", l.aligned_end},
                        {"ranges", ranges}});
    }
    j["layers"] = layers;
    j["runnable"] = true;
    j["unsupported_tensor_types"] = unsupported_types;
    return j;
  }

  static std::string join(const std::set<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  // A well-formed file the Llama view refuses as unsupported: what the file
  // holds, and why it cannot run. Exit 0 (the file is fine; run says the same reason).
  int show_unrunnable(const GgufFile& file, const std::map<std::string, std::pair<uint64_t, uint64_t>>& types,
                      const std::set<std::string>& unsupported_types, const Status& why,
                      const std::string& tokenizer_kind, uint64_t n_tokens) {
    auto arch_value = file.get_string_or("general.architecture", "(none)");
    const std::string arch = arch_value.ok() ? *arch_value : "(not a string)";
    std::printf("architecture:  %s\n", arch.c_str());
    std::printf("tokenizer:     %s (%llu tokens)\n", tokenizer_kind.c_str(), static_cast<unsigned long long>(n_tokens));
    std::printf("tensors:       %zu\n", file.tensors().size());
    std::printf("tensor types: ");
    for (const auto& [name, e] : types) {
      std::printf(" %s x%llu (%s%s)", name.c_str(), static_cast<unsigned long long>(e.first),
                  format_bytes(e.second).c_str(), unsupported_types.count(name) ? ", unsupported" : "");
    }
    std::printf("\n");
    if (!unsupported_types.empty()) std::printf("unsupported:   tensor types %s\n", join(unsupported_types).c_str());
    std::printf("runnable:      no: %s\n", why.message().c_str());
    if (show_metadata_) {
      for (const auto& kv : file.metadata()) std::printf("  %-48s %s\n", kv.key.c_str(), kv.value.to_string().c_str());
    }
    if (!json_path_.empty()) {
      nlohmann::json j;
      j["path"] = path_;
      j["file_bytes"] = file.file_size();
      j["gguf_version"] = file.version();
      j["alignment"] = file.alignment();
      j["architecture"] = arch;
      j["tokenizer"] = {{"model", tokenizer_kind}, {"tokens", n_tokens}};
      j["tensor_count"] = file.tensors().size();
      nlohmann::json jt = nlohmann::json::object();
      for (const auto& [name, e] : types) jt[name] = {{"count", e.first}, {"bytes", e.second}};
      j["tensor_types"] = jt;
      j["runnable"] = false;
      j["unsupported_tensor_types"] = unsupported_types;
      j["unsupported_reason"] = why.message();
      if (Status s = write_json_file(json_path_, j); !s.ok()) return fail(s);
    }
    return kExitOk;
  }

  std::string path_, json_path_;
  bool show_metadata_ = false;
};

}  // namespace
LS_REGISTER_COMMAND(InspectCommand, "inspect",
                    "Validate a GGUF model and show its architecture, tensors and per-layer bytes");
}  // namespace layerstream::cli

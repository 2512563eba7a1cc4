// `layerstream example-model OUT.gguf`: writes the Llama-family example
// model (deterministic pseudo-random weights, example tokenizer; --arch).
#include <csignal>
#include <iostream>

#include "examples/cli/cli_common.h"
#include "layerstream/units.h"
#include "runtime/model/disk_space.h"
#include "runtime/model/example_model.h"

namespace layerstream::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

class ExampleModelCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    sub.add_option("out", out_, "Output GGUF file")->required();
    sub.add_option("--size", size_, "Target file size (e.g. 1GiB); picks layers and widths");
    sub.add_option("--layers", spec_.n_layers, "Number of blocks")->capture_default_str();
    sub.add_option("--hidden", spec_.n_embd, "Embedding width")->capture_default_str();
    sub.add_option("--ffn", spec_.n_ff, "Feed-forward width")->capture_default_str();
    sub.add_option("--heads", spec_.n_head, "Attention heads")->capture_default_str();
    sub.add_option("--kv-heads", spec_.n_head_kv, "Key/value heads")->capture_default_str();
    sub.add_option("--vocab", spec_.n_vocab, "Vocabulary size (>= 512)")->capture_default_str();
    sub.add_option("--ctx", spec_.n_ctx, "Training context length")->capture_default_str();
    sub.add_option("--dtype", dtype_,
                   "Matrix type: f16, bf16, f32, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, "
                   "iq4_nl, iq4_xs, or a mix q4_k_m, q5_k_m, q3_k_m")
        ->capture_default_str();
    sub.add_option("--align", spec_.alignment,
                   "general.alignment: 4096 (to stream) or 32 (input for llama.cpp's llama-quantize)")
        ->capture_default_str();
    sub.add_option("--seed", spec_.seed, "Seed of the weights")->capture_default_str();
    sub.add_option("--arch", spec_.arch,
                   "Architecture: llama, qwen3, gemma3, or the mixtures of experts qwen3moe, mixtral, gpt-oss")
        ->capture_default_str();
    sub.add_option("--experts", spec_.n_expert, "qwen3moe, mixtral, gpt-oss: experts per block (each --ffn wide)");
    sub.add_option("--experts-used", spec_.n_expert_used, "qwen3moe, mixtral, gpt-oss: experts per token");
    sub.add_option("--expert-type", expert_dtype_, "Type of the expert tensors (e.g. mxfp4 as gpt-oss ships them; default: --dtype)");
    sub.add_option("--head-dim", spec_.head_dim, "Attention head width (0: hidden / heads)");
    sub.add_flag("--rope-freqs", spec_.rope_freqs, "llama: add Llama 3.1 RoPE frequency factors");
    sub.add_option("--sliding-window", spec_.sliding_window,
                   "gemma3, gpt-oss: sliding-window width of the local layers (gpt-oss: 0 writes 128)");
    sub.add_option("--threads", threads_, "Generator threads (0: all cores, at most 8)");
    add_json_flag(sub, json_path_);
    shape_opts_ = {"--layers", "--hidden", "--ffn", "--heads", "--kv-heads", "--vocab", "--ctx"};
    sub_ = &sub;
  }

  int run() override {
    const std::optional<ExampleMix> mix = parse_example_mix(dtype_);
    std::optional<GgmlType> type = mix ? example_mix_base(*mix) : parse_ggml_type(dtype_);
    if (!type) {
      return usage_error("--dtype: unknown type '" + dtype_ +
                         "' (f16, bf16, f32, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, "
                         "iq4_xs, q4_k_m, q5_k_m, q3_k_m)");
    }
    ExampleModelSpec spec = spec_;
    spec.dtype = *type;
    if (!expert_dtype_.empty()) {
      spec.expert_dtype = parse_ggml_type(expert_dtype_);
      if (!spec.expert_dtype) return usage_error("--expert-type: unknown type '" + expert_dtype_ + "'");
    }
    spec.mix = mix.value_or(ExampleMix::kUniform);
    if (!size_.empty()) {
      for (const auto& o : shape_opts_) {
        if (o != "--ctx" && sub_->count(o)) return usage_error("--size cannot be combined with " + o);
      }
      auto target = parse_size_flag("--size", size_);
      if (!target.ok()) return usage_error(target.status().message());
      auto s = example_spec_for_size(*target, *type, spec_.seed, spec.mix);
      if (!s.ok()) return fail(s.status());
      if (sub_->count("--ctx")) s->n_ctx = spec_.n_ctx;
      s->arch = spec_.arch;
      s->n_expert = spec_.n_expert;
      s->n_expert_used = spec_.n_expert_used;
      s->expert_dtype = spec.expert_dtype;
      s->rope_freqs = spec_.rope_freqs;
      s->sliding_window = spec_.sliding_window;
      s->alignment = spec.alignment;
      spec = *s;
    }
    if (Status s = validate_example_spec(spec); !s.ok()) return fail(s);
    {  // Refuse before writing when the file cannot fit the disk.
      auto layout = example_model_layout(spec);
      if (!layout.ok()) return fail(layout.status());
      if (Status s = check_free_disk(out_, layout->file_size(), "the example model"); !s.ok()) return fail(s);
    }

    struct sigaction sa {}, old_int{}, old_term{};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    ExampleWriteOptions opt;
    opt.cancel = &g_interrupted;
    opt.threads = threads_;
    const bool tty = stderr_is_tty();
    if (tty) {
      opt.progress = [](uint64_t done, uint64_t total) {
        std::cerr << "\rwriting " << format_bytes(done) << " / " << format_bytes(total) << " ("
                  << (total ? done * 100 / total : 100) << "%)   " << std::flush;
      };
    }
    Status st = write_example_model(out_, spec, opt);
    if (tty) std::cerr << "\n";
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (!st.ok()) return fail(st);

    std::error_code ec;
    const uint64_t bytes = std::filesystem::file_size(out_, ec);
    std::cout << "wrote " << out_ << ": " << format_bytes(bytes) << " (" << bytes << " bytes), " << spec.n_layers
              << " layers, hidden " << spec.n_embd << ", ffn " << spec.n_ff << ", heads " << spec.n_head << "/"
              << spec.n_head_kv << ", vocab " << spec.n_vocab << ", "
              << (spec.n_expert ? std::to_string(spec.n_expert) + " experts (" + std::to_string(spec.n_expert_used) +
                                      " used), "
                                : std::string())
              << (spec.mix != ExampleMix::kUniform ? example_mix_name(spec.mix) : ggml_type_name(static_cast<uint32_t>(spec.dtype)))
              << "\n";
    if (!json_path_.empty()) {
      nlohmann::json j = {{"path", out_},          {"bytes", bytes},           {"layers", spec.n_layers},
                          {"hidden", spec.n_embd}, {"ffn", spec.n_ff},         {"heads", spec.n_head},
                          {"kv_heads", spec.n_head_kv}, {"vocab", spec.n_vocab}, {"ctx", spec.n_ctx},
                          {"dtype", spec.mix != ExampleMix::kUniform ? std::string(example_mix_name(spec.mix))
                                                        : ggml_type_name(static_cast<uint32_t>(spec.dtype))},
                          {"alignment", spec.alignment}, {"seed", spec.seed}, {"arch", spec.arch},
                          {"experts", spec.n_expert}, {"experts_used", spec.n_expert_used}};
      if (Status s = write_json_file(json_path_, j); !s.ok()) return fail(s);
    }
    return kExitOk;
  }

 private:
  std::string out_, size_, dtype_ = "f16", expert_dtype_, json_path_;
  ExampleModelSpec spec_;
  unsigned threads_ = 0;
  std::vector<std::string> shape_opts_;
  CLI::App* sub_ = nullptr;
};

}  // namespace
LS_REGISTER_COMMAND(ExampleModelCommand, "example-model",
                    "Write a Llama-architecture example model (GGUF) of a given size");
}  // namespace layerstream::cli

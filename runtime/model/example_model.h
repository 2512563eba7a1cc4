// The example model: a Llama-family GGUF file with deterministic
// pseudo-random weights and the example tokenizer, of any size. Used by the
// demo, the benchmarks and the tests as a stand-in for a real model. The
// architecture is llama by default; qwen3 and gemma3 (and llama with Llama 3.1
// RoPE frequency factors) give the tests tiny models of those too, and the
// mixtures of experts qwen3moe, mixtral (a llama file with
// llama.expert_count) and gpt-oss the keys, tensor names and shapes llama.cpp
// reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"
#include "runtime/model/gguf_writer.h"

namespace layerstream {

// llama.cpp's mixes: most matrices at the base K type, some at higher
// precision, each tensor at the type `layerstream quantize --type q4_k_m`
// (q5_k_m, q3_k_m) gives it (quantize_plan.h: llama.cpp's rules, e.g. attn_v
// and ffn_down of some layers and the output at Q6_K, and the fallback type
// for rows that are not a multiple of 256).
enum class ExampleMix { kUniform, kQ4_K_M, kQ5_K_M, kQ3_K_M };

// "q4_k_m" -> kQ4_K_M (case-insensitive); nullopt for other names.
std::optional<ExampleMix> parse_example_mix(std::string_view name);
const char* example_mix_name(ExampleMix mix);  // "Q4_K_M"; "uniform"
GgmlType example_mix_base(ExampleMix mix);     // Q4_K for kQ4_K_M (REQUIRES not kUniform)

struct ExampleModelSpec {
  uint32_t n_layers = 4;
  uint32_t n_embd = 256;
  uint32_t n_ff = 704;      // multiple of 32
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t n_vocab = 512;   // >= 512 (the example tokenizer's minimum)
  uint32_t n_ctx = 2048;
  GgmlType dtype = GgmlType::F16;  // type of every matrix (kUniform); norms are F32
  ExampleMix mix = ExampleMix::kUniform;  // not kUniform: dtype is the mix's base type
  uint64_t seed = 1;
  bool tied_output = false; // no output.weight: the head reuses token_embd (as SmolLM2 does)
  // llama, qwen3 (QK-norm, neox RoPE), gemma3, or a mixture of experts:
  // qwen3moe, mixtral (general.architecture "llama" with expert keys).
  std::string arch = "llama";
  // Mixture of experts (qwen3moe, mixtral, gpt-oss only): experts per block,
  // experts per token; each expert is n_ff wide. The router is F32, as
  // llama.cpp's converter and quantiser keep it.
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  // The experts' type (gpt-oss ships them in MXFP4); unset: dtype.
  std::optional<GgmlType> expert_dtype;
  uint32_t head_dim = 0;       // attention.key_length; 0 = n_embd / n_head
  bool rope_freqs = false;     // llama: write a rope_freqs tensor (Llama 3.1 frequency factors)
  // gemma3: attention.sliding_window and attention.sliding_window_pattern
  // (every pattern-th layer global); 0 = the file has no sliding window.
  // gpt-oss always has one (every other layer; 0 here writes 128).
  uint32_t sliding_window = 0;
  uint32_t swa_pattern = 6;
  // general.alignment: 4096 for files we stream (O_DIRECT); 32 for interop
  // files given to llama.cpp's tools (llama-quantize lays data out at 32).
  uint32_t alignment = 4096;
};

// InvalidArgument naming the field when the spec is not a valid Llama model
// (zero sizes, heads not dividing, odd head dim, widths not a multiple of the
// dtype's block size, vocab < 512, an unknown arch, rope_freqs or a sliding
// window on an arch without them, experts on a dense arch or none on a
// mixture, experts_used not in 1..experts) or the dtype is not supported.
Status validate_example_spec(const ExampleModelSpec& spec);

// Picks layers and widths so the file lands within 5% of `target_bytes`
// (InvalidArgument when no shape does, e.g. a target under ~1 MiB).
// With a mix, dtype must be its base type (the sizes count the mix's types).
Result<ExampleModelSpec> example_spec_for_size(uint64_t target_bytes, GgmlType dtype, uint64_t seed = 1,
                                               ExampleMix mix = ExampleMix::kUniform);

// The writer (metadata and tensor layout, no data) for a spec: general.*,
// llama.* and tokenizer.ggml.* keys, tensors 4096-aligned.
Result<GgufWriter> example_model_layout(const ExampleModelSpec& spec);

struct ExampleWriteOptions {
  const std::atomic<bool>* cancel = nullptr;            // see GgufWriter::WriteOptions
  std::function<void(uint64_t, uint64_t)> progress;     // (bytes written, total)
  unsigned threads = 0;                                 // 0: hardware concurrency, at most 8
  bool fsync = true;
};

// Writes the model to `path` (via path.tmp, renamed at the end). The bytes are
// a pure function of the spec (independent of `threads`). Memory use is
// bounded (a few MiB per thread) whatever the model size.
Status write_example_model(const std::string& path, const ExampleModelSpec& spec,
                           const ExampleWriteOptions& options = {});

// llama.cpp's general.file_type (LLAMA_FTYPE_*) for a model whose matrices are `dtype`.
uint32_t llama_file_type(GgmlType dtype);
// ... for a spec (a mix's own file type, e.g. 15 for Q4_K_M).
uint32_t llama_file_type(const ExampleModelSpec& spec);

// general.architecture of the spec's file ("llama" for mixtral).
std::string example_file_arch(const ExampleModelSpec& spec);

}  // namespace layerstream

// The example model: a Llama-family GGUF file with deterministic
// pseudo-random weights and the example tokenizer, of any size. Used by the
// demo, the benchmarks and the tests as a stand-in for a real model. The
// architecture is llama by default; qwen3 and gemma3 (and llama with Llama 3.1
// RoPE frequency factors) give the tests tiny models of those too.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"
#include "runtime/model/gguf_writer.h"

namespace layerstream {

struct ExampleModelSpec {
  uint32_t n_layers = 4;
  uint32_t n_embd = 256;
  uint32_t n_ff = 704;      // multiple of 32
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t n_vocab = 512;   // >= 512 (the example tokenizer's minimum)
  uint32_t n_ctx = 2048;
  GgmlType dtype = GgmlType::F16;  // type of every matrix; norms are F32
  uint64_t seed = 1;
  std::string arch = "llama";  // llama, qwen3 (QK-norm, neox RoPE) or gemma3
  uint32_t head_dim = 0;       // attention.key_length; 0 = n_embd / n_head
  bool rope_freqs = false;     // llama: write a rope_freqs tensor (Llama 3.1 frequency factors)
  // gemma3: attention.sliding_window and attention.sliding_window_pattern
  // (every pattern-th layer global); 0 = the file has no sliding window.
  uint32_t sliding_window = 0;
  uint32_t swa_pattern = 6;
};

// InvalidArgument naming the field when the spec is not a valid Llama model
// (zero sizes, heads not dividing, odd head dim, widths not a multiple of the
// dtype's block size, vocab < 512, an unknown arch, rope_freqs or a sliding
// window on an arch without them) or the dtype is not supported.
Status validate_example_spec(const ExampleModelSpec& spec);

// Picks layers and widths so the file lands within 5% of `target_bytes`
// (InvalidArgument when no shape does, e.g. a target under ~1 MiB).
Result<ExampleModelSpec> example_spec_for_size(uint64_t target_bytes, GgmlType dtype, uint64_t seed = 1);

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

}  // namespace layerstream

// The example model: a Llama-architecture GGUF file with deterministic
// pseudo-random weights and the example tokenizer, of any size. Used by the
// demo, the benchmarks and the tests as a stand-in for a real model.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

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
  bool tied_output = false; // no output.weight: the head reuses token_embd (as SmolLM2 does)
};

// InvalidArgument naming the field when the spec is not a valid Llama model
// (zero sizes, heads not dividing, odd head dim, widths not a multiple of the
// dtype's block size, vocab < 512) or the dtype is not supported.
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

// The layerstream library API: run a Llama-family GGUF model that may be
// larger than the GPU (or RAM) budget, streaming layers from pinned RAM and
// disk while earlier layers compute.
//
//   auto model = layerstream::Model::open("model.gguf", {.vram_budget = 1 << 30});
//   auto ctx = (*model)->create_context();
//   auto result = (*ctx)->generate("Once upon a time", {.max_tokens = 32},
//       [](const layerstream::TokenEvent& t) { std::fputs(t.piece.c_str(), stdout); return true; });
//
// Model (model.h): weights and placement, loaded once, shared by contexts.
// Context (context.h): a KV cache that continues between calls; Batch
// (batch.h) for llama_batch-style decoding; SamplerChain (sampler.h);
// Model::plan (memory_plan.h); chat templates and tool calls (chat.h). Errors are Status values (status.h); nothing
// here prints to stdout. Mistakes in calls (docs/RELIABILITY.md): a bad value
// from data is a Status; an index outside what the library returned (a
// sequence, a token row, a layer) aborts naming the range.
#pragma once

#include <cstdint>
#include <string>

#include "layerstream/batch.h"
#include "layerstream/chat.h"
#include "layerstream/context.h"
#include "layerstream/log.h"
#include "layerstream/memory_plan.h"
#include "layerstream/model.h"
#include "layerstream/options.h"
#include "layerstream/sampler.h"
#include "layerstream/speculative.h"
#include "layerstream/status.h"
#include "layerstream/structured_output.h"

namespace layerstream {

// Writes the example model (a Llama GGUF with pseudo-random weights and a
// tokenizer) to `path`. target_bytes 0: a tiny 4-layer model (~1 MiB).
// OutOfBudget, before writing, when the file would not fit the free disk.
struct ExampleModelOptions {
  uint64_t target_bytes = 0;
  std::string dtype = "f16";  // f32, f16, bf16, q8_0, q4_0, q4_1
  uint64_t seed = 1;
};
Status make_example_model(const std::string& path, const ExampleModelOptions& options = {});

// A one-paragraph summary of Stats for people.
std::string format_stats(const Stats& stats);

}  // namespace layerstream

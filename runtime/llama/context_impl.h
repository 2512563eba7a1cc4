// Context::Impl, shared by context.cpp (decode and KV edits) and
// generate.cpp (the generate loop).
#pragma once

#include <memory>
#include <vector>

#include "layerstream/context.h"
#include "runtime/llama/model_impl.h"

namespace layerstream {

struct Context::Impl {
  std::shared_ptr<Model> model;  // keeps m alive
  Model::Impl* m = nullptr;
  std::vector<int> slots;        // runner sequence slot of each of our sequences
  AbortCallback abort;           // ContextOptions::abort_callback

  // The last decode(): its logits rows, and which row each batch token got.
  std::vector<float> logits;
  std::vector<int> row_of;       // per batch token: logits row, or -1
  // Per sequence: the logits of its latest token that asked for them
  // (generate samples from these), and tokens sampled but not yet decoded
  // (the next generate feeds them first).
  std::vector<std::vector<float>> last_logits;
  std::vector<std::vector<int32_t>> pending;
  // Per sequence: its tokens at positions 0 .. held.size() - 1, what prefix
  // reuse (PromptStart::kReusePrefix) compares prompts with. May be shorter
  // than the sequence (what is not known is not reused); cut to the
  // sequence's position before use (the speculative loop truncates the
  // runner's slot directly).
  std::vector<std::vector<int32_t>> held;

  // Pass figures of the passes this context ran since the last take_pass_sums().
  struct PassSums {
    int passes = 0;
    double measured_s = 0, predicted_s = 0, lower_bound_s = 0, efficiency = 0;
    uint64_t streamed_bytes = 0;
    uint64_t disk_bytes = 0;  // read from disk for these passes
    double disk_s = 0;        // time the disk was busy with those reads
  } decode_sums;

  // Runs `batch` under the model's pass lock; `timing`: add the passes'
  // figures to decode_sums.
  Status run(const Batch& batch, bool timing);
};

}  // namespace layerstream

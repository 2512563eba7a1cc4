// Perplexity of a model over a token sequence, computed as llama.cpp's
// llama-perplexity does (tools/perplexity, its default mode), so the figures
// of the two can be compared:
//   - the tokens are cut into n_chunks non-overlapping windows of n_ctx
//     tokens (n_chunks = min(requested, tokens / n_ctx); at least 2 * n_ctx
//     tokens are required);
//   - each window starts from an empty KV cache; when the tokenizer adds BOS
//     (bos given) the window's first token is replaced by BOS;
//   - only the second half is scored: the logits at positions
//     first = n_ctx/2 .. n_ctx-2 predict the tokens at first+1 .. n_ctx-1;
//   - nll = -log softmax(logits)[target], averaged over every scored token
//     of every window so far; perplexity = exp(mean nll).
// The runner must have been created with logits_all and a context of at
// least n_ctx; windows go through decode_tokens in passes of max_pass_tokens()
// tokens (every token asking for its logits),
// streamed like any other run.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "layerstream/status.h"
#include "runtime/llama/llama_runner.h"

namespace layerstream::llama {

struct PerplexityOptions {
  int n_ctx = 512;             // tokens per window
  int n_chunks = -1;           // windows to score; < 0: all that fit
  std::optional<int32_t> bos;  // replaces each window's first token (tokenizer adds BOS)
};

struct PerplexityChunk {
  int index = 0;           // 0-based window
  double nll = 0;          // mean negative log-likelihood of this window's scored tokens
  double running_ppl = 0;  // exp(mean nll over windows 0..index), what llama-perplexity prints
  double seconds = 0;      // wall time of this window
};

struct PerplexityResult {
  int n_ctx = 0, n_chunks = 0;
  int64_t n_tokens = 0;   // tokens of the whole text
  int64_t scored = 0;     // tokens scored (n_chunks * (n_ctx - 1 - n_ctx/2))
  double ppl = 0;         // exp(mean nll)
  double ppl_stderr = 0;  // llama-perplexity's "+/-": ppl * sqrt(var(nll) / (scored - 1))
  std::vector<PerplexityChunk> chunks;
};

// -log softmax(logits)[target], in double precision (max subtracted).
double token_nll(std::span<const float> logits, int32_t target);

// Called after each window; return false to stop (the result then holds the
// windows done so far, and the status is Cancelled).
using PerplexityProgress = std::function<bool(const PerplexityChunk&, int n_chunks)>;

// InvalidArgument when there are fewer than 2 * n_ctx tokens (names both
// counts), n_ctx < 4 or n_ctx exceeds the runner's context, or the runner
// lacks logits_all.
Result<PerplexityResult> compute_perplexity(LlamaRunner& runner, std::span<const int32_t> tokens,
                                            const PerplexityOptions& options,
                                            const PerplexityProgress& progress = {});

}  // namespace layerstream::llama

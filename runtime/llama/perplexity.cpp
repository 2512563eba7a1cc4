#include "runtime/llama/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/core/status_macros.h"

namespace layerstream::llama {

double token_nll(std::span<const float> logits, int32_t target) {
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - mx);
  return -(double(logits[target]) - mx - std::log(sum));
}

Result<PerplexityResult> compute_perplexity(LlamaRunner& r, std::span<const int32_t> tokens,
                                            const PerplexityOptions& o, const PerplexityProgress& progress) {
  const int n_ctx = o.n_ctx;
  if (n_ctx < 4)
    return Status::InvalidArgument("perplexity: context " + std::to_string(n_ctx) + " is below 4 tokens");
  if (n_ctx > r.n_ctx())
    return Status::InvalidArgument("perplexity: context " + std::to_string(n_ctx) + " exceeds the runner's " +
                                   std::to_string(r.n_ctx()) + " positions");
  if (!r.options().logits_all)
    return Status::InvalidArgument("perplexity: the runner was created without logits_all");
  if (tokens.size() < 2 * size_t(n_ctx))
    return Status::InvalidArgument("perplexity: the text has " + std::to_string(tokens.size()) +
                                   " tokens; a context of " + std::to_string(n_ctx) + " needs at least " +
                                   std::to_string(2 * n_ctx) + " (use a longer text or a smaller --ctx)");
  const int64_t V = r.model().hparams.n_vocab;
  const int max_chunks = static_cast<int>(tokens.size() / n_ctx);
  PerplexityResult res;
  res.n_ctx = n_ctx;
  res.n_chunks = o.n_chunks < 0 ? max_chunks : std::min(o.n_chunks, max_chunks);
  res.n_tokens = static_cast<int64_t>(tokens.size());
  const int first = n_ctx / 2, pass = r.max_pass_tokens();
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::vector<int32_t> window(n_ctx);
  // One pass at a time, every token's logits: the head computes the pass's
  // rows in one product (logits_all), as the figures were made.
  std::vector<PassToken> batch;
  std::vector<float> logits(size_t(pass) * V);
  for (int c = 0; c < res.n_chunks; ++c) {
    const auto t0 = std::chrono::steady_clock::now();
    std::copy(tokens.begin() + int64_t(c) * n_ctx, tokens.begin() + int64_t(c + 1) * n_ctx, window.begin());
    if (o.bos) window[0] = *o.bos;
    LS_RETURN_IF_ERROR(r.reset(0));
    double chunk_nll = 0;
    for (int start = 0; start < n_ctx; start += pass) {
      const int n = std::min(pass, n_ctx - start);
      batch.clear();
      for (int k = 0; k < n; ++k) batch.push_back({window[start + k], start + k, 0, true});
      LS_RETURN_IF_ERROR(r.decode_tokens(batch, logits.data()));
      const std::span<const float> rows(logits.data(), size_t(n) * V);
      // Row k is position start + k; it predicts the token at start + k + 1.
      for (int k = 0; k < n; ++k) {
        const int p = start + k;
        if (p < first || p + 1 >= n_ctx) continue;
        const double v = token_nll(rows.subspan(size_t(k) * V, V), window[p + 1]);
        chunk_nll += v;
        nll += v;
        nll2 += v * v;
        ++count;
      }
    }
    PerplexityChunk ch;
    ch.index = c;
    ch.nll = chunk_nll / (n_ctx - 1 - first);
    ch.running_ppl = std::exp(nll / count);
    ch.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    res.chunks.push_back(ch);
    res.scored = count;
    res.ppl = std::exp(nll / count);
    if (progress && !progress(ch, res.n_chunks)) return Status::Cancelled("perplexity was interrupted");
  }
  const double mean = nll / count, var = nll2 / count - mean * mean;
  res.ppl_stderr = var > 0 && count > 1 ? std::sqrt(var / (count - 1)) * res.ppl : 0;
  return res;
}

}  // namespace layerstream::llama

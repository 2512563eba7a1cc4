// Logits of a runner over a fixed token script, through decode_tokens (the
// path apps take): `prompt` on sequence 0 in one batch asking for its last
// token's logits, then one single-token batch per token of `next`; one
// logits row per step (the parity tests compare these across placements,
// sites and devices).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/llama/llama_runner.h"

namespace layerstream::testing {

// Decodes `tokens` on sequence `seq` from its current position; the last
// token's logits, or an empty row (and a test failure) on error.
inline std::vector<float> decode_last_logits(llama::LlamaRunner& r, const std::vector<int32_t>& tokens, int seq = 0) {
  std::vector<llama::PassToken> batch;
  const int at = r.position(seq);
  for (size_t i = 0; i < tokens.size(); ++i)
    batch.push_back({tokens[i], at + static_cast<int32_t>(i), seq, i + 1 == tokens.size()});
  std::vector<float> logits(r.model().hparams.n_vocab);
  const Status st = r.decode_tokens(batch, logits.data());
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) logits.clear();
  return logits;
}

inline std::vector<std::vector<float>> runner_logits(llama::LlamaRunner& r, const std::vector<int32_t>& prompt,
                                                     const std::vector<int32_t>& next) {
  std::vector<std::vector<float>> out;
  out.push_back(decode_last_logits(r, prompt));
  for (int32_t t : next) out.push_back(decode_last_logits(r, {t}));
  return out;
}

}  // namespace layerstream::testing

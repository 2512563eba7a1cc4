// Batch invariance through the public API: the logits rows of one pass of
// kernels::kBatchInvariantTokens tokens (or more) against the same tokens
// decoded one per pass, bit for bit (what speculative verification and prefix
// reuse rely on). Shared by the host suite and the GPU suite.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "layerstream/layerstream.h"

namespace layerstream::testing {

// Rows of the multi-token pass (n_pass tokens) that differ from their
// one-token pass, and the largest difference, after a prompt of n_prompt
// random tokens (seed `seed`).
struct PassInvariance {
  int rows_differing = 0;
  double max_diff = 0;
};

inline PassInvariance measure_pass_invariance(Model& model, uint64_t seed, int n_prompt = 6,
                                              int n_pass = static_cast<int>(kernels::kBatchInvariantTokens)) {
  auto ctx = model.create_context().value();
  std::mt19937_64 rng(seed);
  std::vector<int32_t> toks;
  for (int i = 0; i < n_prompt + n_pass; ++i) toks.push_back(static_cast<int32_t>(1 + rng() % (model.n_vocab() - 1)));
  Batch prompt;
  prompt.add_sequence(std::vector<int32_t>(toks.begin(), toks.begin() + n_prompt), 0, 0);
  EXPECT_TRUE(ctx->decode(prompt).ok());
  std::vector<std::vector<float>> single;
  for (int i = n_prompt; i < n_prompt + n_pass; ++i) {
    Batch one;
    one.add(toks[i], i, 0, true);
    EXPECT_TRUE(ctx->decode(one).ok());
    const auto l = ctx->logits(0);
    single.emplace_back(l.begin(), l.end());
  }
  EXPECT_TRUE(ctx->remove(0, n_prompt).ok());
  Batch pass;
  for (int i = n_prompt; i < n_prompt + n_pass; ++i) pass.add(toks[i], i, 0, true);
  EXPECT_TRUE(ctx->decode(pass).ok());
  PassInvariance out;
  for (int i = 0; i < n_pass; ++i) {
    const auto l = ctx->logits(i);
    double d = 0;
    for (size_t v = 0; v < l.size(); ++v) d = std::max(d, double(std::fabs(l[v] - single[i][v])));
    out.rows_differing += d > 0;
    out.max_diff = std::max(out.max_diff, d);
  }
  return out;
}

}  // namespace layerstream::testing

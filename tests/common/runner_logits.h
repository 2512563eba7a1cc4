// Logits of a runner over a fixed token script: a prefill of `prompt` on
// sequence 0, then one single-token decode per token of `next`; one logits row
// per step (the parity tests compare these across placements and devices).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/llama/llama_runner.h"

namespace layerstream::testing {

inline std::vector<std::vector<float>> runner_logits(llama::LlamaRunner& r, const std::vector<int32_t>& prompt,
                                                     const std::vector<int32_t>& next) {
  std::vector<std::vector<float>> out;
  Status st = r.prefill(0, prompt);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto l = r.logits(0);
  out.emplace_back(l.begin(), l.end());
  for (int32_t t : next) {
    const int seq = 0;
    st = r.decode(std::span<const int>(&seq, 1), std::span<const int32_t>(&t, 1));
    EXPECT_TRUE(st.ok()) << st.ToString();
    l = r.logits(0);
    out.emplace_back(l.begin(), l.end());
  }
  return out;
}

}  // namespace layerstream::testing

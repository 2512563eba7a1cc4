// What the runner suites share around a tiny example model: the runner
// options they start from, random prompts, a VRAM budget any placement fits
// in, and the bit-for-bit comparison of logits rows.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/llama/llama_runner.h"

namespace layerstream::testing {

// A 64-token context on a 20 GB/s link and a 5 GB/s disk (the figures the
// planner decides by; the host backend does not throttle to them).
inline llama::RunnerOptions tiny_runner_options(bool trace) {
  llama::RunnerOptions o;
  o.n_ctx = 64;
  o.link_gbps = 20;
  o.disk_gbps = 5;
  o.trace = trace;
  return o;
}

// `n` tokens drawn uniformly from [0, vocab).
inline std::vector<int32_t> random_tokens(std::mt19937_64& rng, int n, int vocab) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// A VRAM budget for `resident`'s model in which every layer can be resident
// and a 2-slot window still fits (each layer rounded up to 4 KiB plus 8 KiB
// of slack), and `largest_slot`, the slot of its largest layer.
inline uint64_t any_placement_vram(llama::LlamaRunner& resident, uint64_t* largest_slot = nullptr) {
  uint64_t all = 0, largest = 0;
  for (uint64_t b : resident.executor().layer_bytes()) {
    all += sched::round_up(b, 4096) + 8192;
    largest = std::max(largest, sched::round_up(b, 4096) + 8192);
  }
  if (largest_slot) *largest_slot = largest;
  return resident.reserve().total() + 4096 + all + 2 * largest;
}

// Every logits row of `got` equals `want`'s bit for bit.
inline void expect_same_logits(const std::vector<std::vector<float>>& got,
                               const std::vector<std::vector<float>>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)))
        << "logits row " << i << " differ (" << what << ")";
  }
}

}  // namespace layerstream::testing

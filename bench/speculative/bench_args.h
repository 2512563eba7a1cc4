// Flags and shared steps of bench_speculative (bench/speculative/main.cpp):
// one model opened once, greedy generations with and without a draft.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layerstream/layerstream.h"

namespace layerstream::bench_speculative {

struct Args {
  std::string mode;  // identity | lengths
  std::string model, draft, json;
  std::vector<std::string> kinds = {"lookup", "chain"};  // identity: draft kinds
  std::vector<int> lengths = {1, 2, 4, 7};               // lengths: fixed draft lengths swept
  uint64_t vram = 0;                                     // 0: every layer resident
  uint64_t ram = 0;     // pinned RAM tier: streamed layers come from RAM, not the disk
  double sim_link = 0;  // GB/s; 0: off
  int prompts = 64, tokens = 32, rounds = 3, threads = 2;
  int ctx = 256;  // positions per sequence (the KV cache shares the budget)
  std::string prompt =
      "Repeat this passage exactly. Passage: The quick brown fox jumps over the lazy dog near the "
      "river bank, and the dog sleeps on in the warm afternoon sun. Repeated: The quick brown fox";
};

// false (after saying why on stderr) for unknown flags or missing values.
bool parse(int argc, char** argv, Args& a);

// The target as the flags ask: host backend; resident with --vram 0, else
// streamed through the budget (the overlap strategy: every layer streams).
Result<std::shared_ptr<Model>> open_target(const Args& a);

// A draft source of `kind`: "lookup" (n-gram prompt lookup) or "chain"
// (the --draft model, resident, proposing its greedy chain).
Result<std::shared_ptr<DraftSource>> make_draft(const std::string& kind, const Args& a, const Model& target);

// n greedy tokens after `tokens` on a fresh context; `draft` null: plain.
Result<GenerateResult> greedy(Model& model, const std::vector<int32_t>& tokens, int n,
                              const std::shared_ptr<DraftSource>& draft, int draft_max = kMaxDraftTokens,
                              bool adaptive = true);

int fail(const Status& s);  // prints s, returns 2

int run_identity(const Args& a);  // identity.cpp
int run_lengths(const Args& a);   // lengths.cpp

}  // namespace layerstream::bench_speculative

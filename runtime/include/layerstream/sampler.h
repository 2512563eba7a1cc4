// Samplers, separate from decoding: a chain of stages applied in the order
// added to one row of logits, then a draw (or argmax when greedy).
//
//   auto chain = SamplerChain::from({.temperature = 0.7f, .top_k = 40, .seed = 1});
//   int32_t t = chain.sample(context->logits(i));
//   chain.accept(t);   // history for the repetition penalty
//
// Deterministic: the same seed, logits and accepted tokens give the same
// tokens. Thread safety: one thread uses a chain at a time.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace layerstream {

struct SamplingOptions {
  float temperature = 0.8f;     // <= 0: greedy (argmax after the penalty)
  int top_k = 40;               // <= 0: all
  float top_p = 0.95f;          // >= 1: all
  float min_p = 0.05f;          // <= 0: all; else drop tokens below min_p x the top probability
  float repeat_penalty = 1.0f;  // 1: off; > 1 makes recent tokens less likely
  int repeat_last_n = 64;       // tokens of history the penalty looks at
  uint64_t seed = 0;
};

class SamplerChain {
 public:
  explicit SamplerChain(uint64_t seed = 0);
  // repetition penalty, top-k, top-p, min-p, temperature (llama.cpp's order).
  static SamplerChain from(const SamplingOptions& options);

  SamplerChain& add_repetition_penalty(float penalty, int last_n);
  SamplerChain& add_top_k(int k);
  SamplerChain& add_top_p(float p);
  SamplerChain& add_min_p(float p);
  SamplerChain& add_temperature(float t);  // t <= 0 makes the chain greedy

  // Picks a token id from `logits` (one row, n_vocab floats). Does not
  // accept it. Empty logits: -1.
  int32_t sample(std::span<const float> logits);
  // Adds `token` to the history the repetition penalty sees.
  void accept(int32_t token);
  // Clears the history and restarts the random stream from the seed.
  void reset();

 private:
  enum class Kind { kPenalty, kTopK, kTopP, kMinP, kTemperature };
  struct Stage {
    Kind kind;
    float value = 0;
    int count = 0;
  };
  struct Candidate {
    float logit;
    int32_t id;
  };
  // Greedy with no penalty stage: every filter keeps the top token, so the
  // pick is the row's argmax, found without the candidate list.
  bool plain_argmax() const;
  // Sorts by logit, highest first (the lowest id first on a tie), and
  // returns the softmax probabilities.
  static std::vector<double> sorted_probs(std::vector<Candidate>& c);
  std::vector<Stage> stages_;
  std::vector<Candidate> cand_;  // sample()'s candidate list, kept: a vocabulary's worth per token
  std::vector<int32_t> history_;
  uint64_t seed_;
  std::mt19937_64 rng_;
};

}  // namespace layerstream

// Samplers, separate from decoding: a chain of stages applied in the order
// added to one row of logits, then a draw (or argmax when greedy).
//
//   auto chain = SamplerChain::from({.temperature = 0.7f, .top_k = 40, .seed = 1});
//   int32_t t = chain.sample(context->logits(i));
//   chain.accept(t);   // history for the penalties
//
// Deterministic: the same seed, logits and accepted tokens give the same
// tokens. Thread safety: one thread uses a chain at a time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {

// SamplingOptions::seed meaning "a fresh random seed for each chain".
inline constexpr uint64_t kRandomSeed = ~uint64_t{0};

// The stages of llama.cpp's default chain, in the order they run: logit bias,
// penalties, top-k, typical-p, top-p, min-p, temperature, then the draw.
// Every "off" value below leaves the distribution unchanged. Check a set of
// values with validate_sampling() before use.
struct SamplingOptions {
  float temperature = 0.8f;     // >= 0; 0: greedy (argmax after bias and penalties)
  int top_k = 40;               // >= 0; 0: all
  float top_p = 0.95f;          // (0, 1]; 1: all
  float min_p = 0.05f;          // [0, 1]; 0: all; else drop tokens below min_p x the top probability
  float repeat_penalty = 1.0f;  // > 0; 1: off; > 1 makes recent tokens less likely (divides a
                                // positive logit, multiplies a negative one: llama.cpp's rule)
  int repeat_last_n = 64;       // the penalties' window of recent tokens; 0: off, -1: the whole history
  uint64_t seed = kRandomSeed;  // kRandomSeed: random per chain (SamplerChain::seed() tells which)
  float typical_p = 1.0f;       // (0, 1]; 1: off; locally typical sampling (Meister et al. 2022)
  // OpenAI's penalties over the same window: logit -= presence (if the token
  // occurs) + frequency x its count. Finite; 0: off; negative favours repeats.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Added to a token's logit before every other stage (-infinity bans it).
  std::map<int32_t, float> logit_bias;
};

// What is wrong with a SamplingOptions: the field (its name above) and a
// sentence naming it, the value and the accepted range.
struct SamplingProblem {
  std::string field;
  std::string message;
};
// The first problem of `o`, or nothing. `n_vocab` > 0 also checks the
// logit_bias token ids.
std::optional<SamplingProblem> find_sampling_problem(const SamplingOptions& o, int n_vocab = 0);
// The same as a Status: InvalidArgument(problem.message).
Status validate_sampling(const SamplingOptions& o, int n_vocab = 0);

// Log-probability of a token under the softmax of a raw logits row (no
// temperature, penalty or filter: what OpenAI and vLLM report), and the
// most likely alternatives.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob), most likely first
};
// `token`'s log-softmax in `logits`, and the `top_n` most likely tokens (the
// ranking rule of the argmax: lower id first on a tie). Computed in double.
// Requires 0 <= token < logits.size().
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int top_n);

class SamplerChain {
 public:
  // kRandomSeed draws a seed from std::random_device.
  explicit SamplerChain(uint64_t seed = kRandomSeed);
  // logit bias, penalties, top-k, typical-p, top-p, min-p, temperature
  // (llama.cpp's order); stages whose value is "off" are left out.
  // Does not validate: call validate_sampling() first.
  static SamplerChain from(const SamplingOptions& options);

  SamplerChain& add_logit_bias(const std::map<int32_t, float>& bias);
  SamplerChain& add_repetition_penalty(float penalty, int last_n);
  SamplerChain& add_penalties(float repeat, float presence, float frequency, int last_n);
  SamplerChain& add_top_k(int k);
  SamplerChain& add_typical_p(float p);
  SamplerChain& add_top_p(float p);
  SamplerChain& add_min_p(float p);
  SamplerChain& add_temperature(float t);  // t <= 0 makes the chain greedy

  // Picks a token id from `logits` (one row, n_vocab floats). Does not
  // accept it. Empty logits: -1.
  int32_t sample(std::span<const float> logits);
  // The candidates left after every stage and their probabilities (what
  // sample() draws from), most likely first; greedy: the one pick with 1.
  std::vector<std::pair<int32_t, double>> distribution(std::span<const float> logits);
  // Adds `token` to the history the penalties see.
  void accept(int32_t token);
  // Clears the history and restarts the random stream from the seed.
  void reset();
  // The seed in use (the drawn one when constructed with kRandomSeed).
  uint64_t seed() const { return seed_; }

 private:
  enum class Kind { kBias, kPenalty, kTopK, kTypicalP, kTopP, kMinP, kTemperature };
  struct Stage {
    Kind kind;
    float value = 0;  // penalty: repeat; others: their parameter
    int count = 0;    // penalty: window; top-k: k
    float presence = 0, frequency = 0;
    std::map<int32_t, float> bias = {};
  };
  struct Candidate {
    float logit;
    int32_t id;
  };
  // Greedy with no bias or penalty stage: every filter keeps the top token,
  // so the pick is the row's argmax, found without the candidate list.
  bool plain_argmax() const;
  // Runs every stage over the row; false when the result is greedy (the
  // pick is the first candidate by rank).
  bool apply_stages(std::span<const float> logits);
  void apply_penalty(const Stage& st);
  void apply_typical(float p);
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

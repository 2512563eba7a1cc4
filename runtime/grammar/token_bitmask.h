// TokenBitmask: which tokens a constraint allows at the next step, one bit
// per token id (bit j of word i is token 32 * i + j; set = allowed), the
// layout xgrammar fills. apply_token_bitmask() is the sampler's stage: the
// logits of every token the mask rules out become -inf, so whatever the
// later stages do (temperature, top-k/p, penalties) only allowed tokens can
// be drawn.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace layerstream::grammar {

class TokenBitmask {
 public:
  // A mask over ids [0, vocab_size) with every token allowed.
  explicit TokenBitmask(int32_t vocab_size);

  int32_t vocab_size() const { return vocab_size_; }
  bool allows(int32_t id) const;
  int32_t count_allowed() const;
  void allow_all();

  // ceil(vocab_size / 32) words; bits past vocab_size are unused.
  std::span<int32_t> words() { return words_; }
  std::span<const int32_t> words() const { return words_; }

 private:
  int32_t vocab_size_;
  std::vector<int32_t> words_;
};

// Sets logits[id] to -inf for every id the mask does not allow, and for the
// ids at or past mask.vocab_size() (rows of a padded output head, which no
// token of the vocabulary names). Cost: a pass over the words, touching only
// logits of words that rule something out.
void apply_token_bitmask(const TokenBitmask& mask, std::span<float> logits);

}  // namespace layerstream::grammar

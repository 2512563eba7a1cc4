#include "runtime/grammar/token_bitmask.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "runtime/core/status_macros.h"

namespace layerstream::grammar {

TokenBitmask::TokenBitmask(int32_t vocab_size)
    : vocab_size_(vocab_size), words_((static_cast<size_t>(vocab_size) + 31) / 32, -1) {
  LS_CHECK(vocab_size >= 0);
}

bool TokenBitmask::allows(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return false;
  return (static_cast<uint32_t>(words_[id / 32]) >> (id % 32)) & 1u;
}

int32_t TokenBitmask::count_allowed() const {
  int32_t n = 0;
  for (size_t w = 0; w < words_.size(); ++w) {
    uint32_t bits = static_cast<uint32_t>(words_[w]);
    const int32_t first = static_cast<int32_t>(w * 32);
    if (vocab_size_ - first < 32) bits &= (1u << (vocab_size_ - first)) - 1u;  // the last word's tail
    n += std::popcount(bits);
  }
  return n;
}

void TokenBitmask::allow_all() { std::fill(words_.begin(), words_.end(), -1); }

void apply_token_bitmask(const TokenBitmask& mask, std::span<float> logits) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  const size_t masked_end = std::min(n, static_cast<size_t>(mask.vocab_size()));
  const std::span<const int32_t> words = mask.words();
  for (size_t w = 0; w * 32 < masked_end; ++w) {
    const uint32_t bits = static_cast<uint32_t>(words[w]);
    if (bits == ~0u) continue;  // all 32 allowed (inside a string, most words)
    const size_t end = std::min(masked_end, w * 32 + 32);
    if (bits == 0) {  // all 32 ruled out (most words after a value)
      std::fill(logits.begin() + w * 32, logits.begin() + end, kMinusInf);
      continue;
    }
    for (size_t id = w * 32; id < end; ++id)
      if (!((bits >> (id - w * 32)) & 1u)) logits[id] = kMinusInf;
  }
  for (size_t id = masked_end; id < n; ++id) logits[id] = kMinusInf;
}

}  // namespace layerstream::grammar

// What a draft source has seen of the target's sequence, by position: the
// sources are told the tokens from some position on, and keep the rest.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace layerstream {

class DraftHistory {
 public:
  // Records `tokens` at first_position...; what followed them is forgotten
  // (the target rewrote it). Returns false, and forgets everything, when
  // first_position is past the positions seen (earlier tokens unknown).
  bool update(int first_position, std::span<const int32_t> tokens) {
    if (first_position < 0 || static_cast<size_t>(first_position) > tokens_.size()) {
      tokens_.clear();
      return false;
    }
    tokens_.resize(first_position);
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    return true;
  }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  std::vector<int32_t> tokens_;  // index = position
};

}  // namespace layerstream

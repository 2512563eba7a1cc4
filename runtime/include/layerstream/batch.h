// Batch: the tokens one Context::decode call runs, like llama.cpp's
// llama_batch. Each token names the sequence it extends, its position in that
// sequence, and whether the caller wants its logits.
//
// Contract (checked by decode): a sequence's tokens appear in increasing,
// consecutive positions that continue the sequence (the first at
// Context::position(seq)); tokens of different sequences may interleave.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace layerstream {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;  // per token
  std::vector<int32_t> sequences;  // per token: the context's sequence (0..Context::sequences()-1)
  std::vector<uint8_t> logits;     // per token: 1 = return its logits (Context::logits(i))

  void add(int32_t token, int32_t position, int32_t sequence, bool want_logits) {
    tokens.push_back(token);
    positions.push_back(position);
    sequences.push_back(sequence);
    logits.push_back(want_logits ? 1 : 0);
  }
  // `tokens` appended to `sequence` from `first_position`; logits for the last.
  void add_sequence(const std::vector<int32_t>& ids, int32_t first_position, int32_t sequence,
                    bool logits_for_last = true) {
    for (size_t i = 0; i < ids.size(); ++i)
      add(ids[i], first_position + static_cast<int32_t>(i), sequence, logits_for_last && i + 1 == ids.size());
  }
  size_t size() const { return tokens.size(); }
  bool empty() const { return tokens.empty(); }
  void clear() {
    tokens.clear();
    positions.clear();
    sequences.clear();
    logits.clear();
  }
};

}  // namespace layerstream

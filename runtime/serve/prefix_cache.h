// PrefixCache: what each KV sequence of the server's context holds, so that
// a request starts from the longest token prefix some sequence already has
// (a previous request's prompt and answer, a shared system prompt, the
// earlier turns of a chat) and prefills only the rest.
//
// Storage is the context's sequences themselves: a request that ends leaves
// its tokens' KV in its sequence, which becomes a cache entry until a new
// request takes it (least recently used first). The runner's KV cache is one
// contiguous, positional slot per sequence — no paged blocks that entries
// could share — so an entry is the token list of one sequence, and a lookup
// compares the prompt with each entry. With a pool of tens of sequences that
// is microseconds against a pass of milliseconds; a radix tree would only
// speed up that lookup, not save memory.
//
// Bookkeeping only: the scheduler applies a Placement to the context
// (copy_sequence, then remove) before it decodes the rest of the prompt.
//
// Thread safety: none; the scheduler's loop thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace layerstream::serve {

class PrefixCache {
 public:
  // `sequences`: the context's sequences. `enabled` false: no reuse, every
  // request starts from an empty sequence (placement still picks one).
  PrefixCache(int sequences, bool enabled);

  // Where a request runs and what it reuses. The request's sequence `seq`
  // is made to hold the prompt's first `reused` tokens: copied from
  // `source` when that is another sequence, kept in place when it is `seq`
  // (nothing copied when -1), then everything from position `reused` on is
  // removed. What an entry offers is llama::reusable_prefix (the rule the
  // library's Context::generate follows too): the last prompt token is
  // always decoded, its logits start the generation.
  struct Placement {
    int seq = -1;
    int source = -1;
    int reused = 0;
  };
  // Requires a free sequence (free_sequences() > 0) and a non-empty prompt.
  Placement place(std::span<const int32_t> prompt) const;

  // The request's sequence becomes busy, holding `held` (its reused prefix).
  void take(int seq, std::span<const int32_t> held);
  // Tokens whose KV a pass appended to `seq`.
  void extend(int seq, std::span<const int32_t> tokens);
  // The request ended: its tokens stay as a cache entry (dropped when disabled).
  void release(int seq);
  // What `seq` holds is unknown (a failed pass): nothing is reused from it.
  void forget(int seq);

  bool enabled() const { return enabled_; }
  int sequences() const { return static_cast<int>(entries_.size()); }
  int free_sequences() const;
  // KV positions held by busy sequences, and by free ones (cache entries).
  int64_t busy_tokens() const;
  int64_t cached_tokens() const;
  const std::vector<int32_t>& tokens(int seq) const { return entries_[seq].tokens; }

  // Copying another sequence's KV costs a copy of all of it; below this many
  // reused tokens a fresh prefill is as cheap, so such short matches (a BOS
  // and a word) are not worth copying.
  static constexpr int kMinCopyTokens = 16;

 private:
  struct Entry {
    std::vector<int32_t> tokens;  // whose KV the sequence holds, positions 0..size-1
    bool busy = false;
    uint64_t last_used = 0;  // the clock at its last release: LRU eviction
  };
  int least_recently_used_free(int except) const;

  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
  const bool enabled_;
};

}  // namespace layerstream::serve

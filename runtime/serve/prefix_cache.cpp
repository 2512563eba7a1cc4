#include "runtime/serve/prefix_cache.h"

#include <algorithm>

#include "runtime/core/status_macros.h"
#include "runtime/llama/prefix_reuse.h"

namespace layerstream::serve {

PrefixCache::PrefixCache(int sequences, bool enabled) : entries_(static_cast<size_t>(sequences)), enabled_(enabled) {}

int PrefixCache::least_recently_used_free(int except) const {
  int pick = -1;
  for (int i = 0; i < sequences(); ++i) {
    const Entry& e = entries_[i];
    if (e.busy || i == except) continue;
    // An empty sequence costs nothing to take; then the oldest entry.
    const auto rank = [](const Entry& x) { return x.tokens.empty() ? 0 : x.last_used + 1; };
    if (pick < 0 || rank(e) < rank(entries_[pick])) pick = i;
  }
  return pick;
}

PrefixCache::Placement PrefixCache::place(std::span<const int32_t> prompt) const {
  LS_CHECK_MSG(!prompt.empty(), "PrefixCache::place: an empty prompt");
  Placement p;
  p.seq = least_recently_used_free(-1);
  LS_CHECK_MSG(p.seq >= 0, "PrefixCache::place: no free sequence");
  if (!enabled_) return p;

  // The entry with the longest common prefix; among equals, one that is free
  // and wholly a prefix of the prompt (extended in place: nothing copied,
  // nothing lost), then the most recently used.
  int best = -1, best_len = 0;
  bool best_in_place = false;
  for (int i = 0; i < sequences(); ++i) {
    const Entry& e = entries_[i];
    const int len = llama::reusable_prefix(e.tokens, prompt);
    if (len == 0) continue;
    const bool in_place = !e.busy && len == static_cast<int>(e.tokens.size());
    const bool better = len > best_len || (len == best_len && in_place && !best_in_place) ||
                        (len == best_len && in_place == best_in_place && e.last_used > entries_[best].last_used);
    if (better) {
      best = i;
      best_len = len;
      best_in_place = in_place;
    }
  }
  if (best < 0) return p;
  const Entry& b = entries_[best];
  // Free and nothing else free: reuse it in place even if its tail is lost.
  const int other = b.busy ? p.seq : least_recently_used_free(best);
  if (!b.busy && (best_in_place || other < 0)) return {best, best, best_len};
  if (best_len < kMinCopyTokens) return p;
  return {other, best, best_len};
}

void PrefixCache::take(int seq, std::span<const int32_t> held) {
  Entry& e = entries_[seq];
  LS_CHECK_MSG(!e.busy, "PrefixCache::take: sequence " + std::to_string(seq) + " is busy");
  e.busy = true;
  e.tokens.assign(held.begin(), held.end());
}

void PrefixCache::extend(int seq, std::span<const int32_t> tokens) {
  entries_[seq].tokens.insert(entries_[seq].tokens.end(), tokens.begin(), tokens.end());
}

void PrefixCache::release(int seq) {
  Entry& e = entries_[seq];
  e.busy = false;
  e.last_used = ++clock_;
  if (!enabled_) e.tokens.clear();
}

void PrefixCache::forget(int seq) { entries_[seq].tokens.clear(); }

int PrefixCache::free_sequences() const {
  return static_cast<int>(std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return !e.busy; }));
}

int64_t PrefixCache::busy_tokens() const {
  int64_t n = 0;
  for (const Entry& e : entries_)
    if (e.busy) n += static_cast<int64_t>(e.tokens.size());
  return n;
}

int64_t PrefixCache::cached_tokens() const {
  int64_t n = 0;
  for (const Entry& e : entries_)
    if (!e.busy) n += static_cast<int64_t>(e.tokens.size());
  return n;
}

}  // namespace layerstream::serve

// PrefixCache placement: the longest held prefix is reused (never the last
// prompt token), an entry that is wholly a prefix is extended in place, a
// partial match is copied into the least recently used free sequence, short
// matches are not worth a copy, and nothing is reused when disabled.
#include "runtime/serve/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace layerstream::serve {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Runs a request to the end: it takes its placement, decodes `prompt` and
// `answer`, and leaves them behind.
PrefixCache::Placement serve_once(PrefixCache& c, const std::vector<int32_t>& prompt,
                                  const std::vector<int32_t>& answer = {}) {
  const PrefixCache::Placement p = c.place(prompt);
  c.take(p.seq, std::span(prompt).first(static_cast<size_t>(p.reused)));
  c.extend(p.seq, std::span(prompt).subspan(static_cast<size_t>(p.reused)));
  c.extend(p.seq, answer);
  c.release(p.seq);
  return p;
}

TEST(PrefixCache, TheSamePromptReusesAllButItsLastToken) {
  PrefixCache c(2, true);
  const auto prompt = iota_tokens(40, 1);
  const auto first = serve_once(c, prompt, {7, 8});
  EXPECT_EQ(first.reused, 0);
  EXPECT_EQ(first.source, -1);
  const auto again = c.place(prompt);
  EXPECT_EQ(again.reused, 39) << "the last prompt token is decoded for its logits";
  EXPECT_EQ(again.source, first.seq);
  EXPECT_NE(again.seq, first.seq) << "the entry holds an answer after the prompt: copied, not cut";
}

TEST(PrefixCache, AnEntryThatIsWhollyAPrefixIsExtendedInPlace) {
  PrefixCache c(3, true);
  const auto turn1 = iota_tokens(30, 1);
  const auto first = serve_once(c, turn1);
  auto turn2 = turn1;
  for (int32_t t : {500, 501, 502}) turn2.push_back(t);
  const auto p = c.place(turn2);
  EXPECT_EQ(p.reused, 30);
  EXPECT_EQ(p.seq, first.seq);
  EXPECT_EQ(p.source, first.seq);
}

TEST(PrefixCache, APartialMatchIsCopiedIntoTheLeastRecentlyUsedFreeSequence) {
  PrefixCache c(3, true);
  const auto shared = iota_tokens(20, 1);
  auto a = shared, b = iota_tokens(25, 300), d = shared;
  a.insert(a.end(), {900, 901, 902});
  d.insert(d.end(), {700, 701});
  const int seq_a = serve_once(c, a).seq;
  const int seq_b = serve_once(c, b).seq;
  const auto p = c.place(d);
  EXPECT_EQ(p.source, seq_a);
  EXPECT_EQ(p.reused, 20);
  EXPECT_NE(p.seq, seq_a);
  EXPECT_NE(p.seq, seq_b) << "the empty third sequence goes before any entry";
  serve_once(c, d);
  // Every sequence holds an entry now: the next fresh prompt evicts the
  // least recently used (a).
  EXPECT_EQ(c.place(iota_tokens(10, 2000)).seq, seq_a);
}

TEST(PrefixCache, ShortMatchesAreNotCopiedButAreExtendedInPlace) {
  PrefixCache c(2, true);
  auto a = iota_tokens(PrefixCache::kMinCopyTokens - 1, 1);
  a.push_back(999);
  const int seq_a = serve_once(c, a).seq;
  auto b = iota_tokens(PrefixCache::kMinCopyTokens - 1, 1);
  b.push_back(5000);
  const auto p = c.place(b);
  EXPECT_EQ(p.reused, 0) << "a copy of the whole entry for a few tokens";
  EXPECT_NE(p.seq, seq_a);
  c.take(p.seq, {});
  // With the other sequence busy, the entry is the only free one: cut in place.
  const auto q = c.place(b);
  EXPECT_EQ(q.seq, seq_a);
  EXPECT_EQ(q.source, seq_a);
  EXPECT_EQ(q.reused, PrefixCache::kMinCopyTokens - 1);
}

TEST(PrefixCache, ABusySequencesDecodedPrefixCanBeCopied) {
  PrefixCache c(2, true);
  const auto prompt = iota_tokens(50, 1);
  const auto p = c.place(prompt);
  c.take(p.seq, {});
  c.extend(p.seq, prompt);
  const auto q = c.place(prompt);
  EXPECT_NE(q.seq, p.seq);
  EXPECT_EQ(q.source, p.seq);
  EXPECT_EQ(q.reused, 49);
  EXPECT_EQ(c.busy_tokens(), 50);
  EXPECT_EQ(c.free_sequences(), 1);
}

TEST(PrefixCache, DisabledOrForgottenMeansNoReuse) {
  PrefixCache off(2, false);
  const auto prompt = iota_tokens(40, 1);
  serve_once(off, prompt);
  EXPECT_EQ(off.place(prompt).reused, 0);
  EXPECT_EQ(off.cached_tokens(), 0);

  PrefixCache on(1, true);
  const int seq = serve_once(on, prompt).seq;
  EXPECT_EQ(on.cached_tokens(), 40);
  on.forget(seq);
  EXPECT_EQ(on.place(prompt).reused, 0);
}

}  // namespace
}  // namespace layerstream::serve

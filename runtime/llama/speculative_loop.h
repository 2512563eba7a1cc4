// The speculative generate loop (layerstream/speculative.h), run by
// Context::generate in place of its one-token-per-pass loop. It drives the
// same per-token steps: `sample` takes the context's latest logits
// (Context::Impl::last_logits) and returns the token to decode next at the
// context's position (empty: generation stopped), `decode` runs and times a
// pass.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "layerstream/context.h"
#include "layerstream/speculative.h"
#include "runtime/llama/context_impl.h"

namespace layerstream::speculative {

using SampleFn = std::function<Batch(int step)>;
using DecodeFn = std::function<Status(const Batch&)>;

// InvalidArgument when `o` cannot run on `ctx` (draft_max or branches out
// of range, several sequences); OutOfBudget when the model's KV pool has no
// free sequence for each side branch. Checked before anything is decoded.
Status check(const Context& ctx, const Context::Impl& c, const SpeculativeOptions& o);

// Generation after the prefill of `fed` (the tokens this call decoded, which
// end at the context's position): per pass, the sampled token and the
// source's drafts (a chain, or a tree's branches as extra sequences)
// decoded together with logits for each, then the tokens sampled from those
// rows kept while they equal the drafts, the KV cache cut after the last
// kept one.
Result<SpeculativeStats> generate(Context& ctx, Context::Impl& c, const SpeculativeOptions& o,
                                  const std::vector<int32_t>& fed, const SampleFn& sample, const DecodeFn& decode);

// Test seam, for tests only (no public header reaches it): a rule that
// rewrites each verification row's logits before the sampler draws from
// it, given the token drafted at that row (-1 on the row after the last
// draft). It lets a test run a broken acceptance rule (forcing the draft:
// "keep every draft") and check that its statistics catch it. Null, the
// default, leaves the rows as the model computed them.
using RowRuleForTesting = void (*)(std::span<float> logits, int32_t draft);
// Sets the rule while in scope (one at a time; the previous rule after).
class ScopedRowRuleForTesting {
 public:
  explicit ScopedRowRuleForTesting(RowRuleForTesting rule);
  ~ScopedRowRuleForTesting();
  ScopedRowRuleForTesting(const ScopedRowRuleForTesting&) = delete;
  ScopedRowRuleForTesting& operator=(const ScopedRowRuleForTesting&) = delete;

 private:
  RowRuleForTesting previous_;
};

// Adds `s` to the call's figures: the draft time joins decode_s (and the
// decode rate), s becomes st.speculative.
void add_to(Stats& st, const SpeculativeStats& s);

}  // namespace layerstream::speculative

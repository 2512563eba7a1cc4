// The speculative generate loop (layerstream/speculative.h), run by
// Context::generate in place of its one-token-per-pass loop. It drives the
// same per-token steps: `sample` takes the context's latest logits
// (Context::Impl::last_logits) and returns the token to decode next at the
// context's position (empty: generation stopped), `decode` runs and times a
// pass.
#pragma once

#include <functional>
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

// Adds `s` to the call's figures: the draft time joins decode_s (and the
// decode rate), s becomes st.speculative.
void add_to(Stats& st, const SpeculativeStats& s);

}  // namespace layerstream::speculative

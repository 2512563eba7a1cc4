// Speculative generation (speculative_loop.h): draft, verify in one pass,
// keep the longest agreed prefix, roll the KV cache back past it.
#include "runtime/llama/speculative_loop.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "kernels/kernels.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/draft_length.h"

namespace layerstream::speculative {

// A verification pass carries the sampled token and the drafts; within the
// kernels' batch-invariant size every row gets the bits of a one-token pass,
// so greedy speculation reproduces plain greedy decoding exactly.
static_assert(kMaxDraftTokens + 1 <= kernels::kBatchInvariantTokens);

namespace {

std::atomic<RowRuleForTesting> row_rule_for_testing{nullptr};  // ScopedRowRuleForTesting

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One generate() call's speculative state: the sequence's tokens of this
// call (for the draft source) and the figures.
class Loop {
 public:
  Loop(Context& ctx, Context::Impl& c, const SpeculativeOptions& o, const std::vector<int32_t>& fed)
      : ctx_(ctx),
        c_(c),
        opt_(o),
        tokens_(fed),
        first_(ctx.position(0) - static_cast<int>(fed.size())),
        length_(o.draft_max) {
    st_.drafted_at_depth.assign(o.draft_max, 0);
    st_.accepted_at_depth.assign(o.draft_max, 0);
  }

  Status run(const SampleFn& sample, const DecodeFn& decode) {
    int step = 0;
    Batch next = sample(step++);
    while (!next.empty()) {
      const int32_t token = next.tokens[0];
      const int at = ctx_.position(0);  // where `token` goes
      tokens_.push_back(token);
      LS_ASSIGN_OR_RETURN(std::vector<int32_t> drafts, draft(at));
      Batch verify;
      verify.add(token, at, 0, true);
      for (size_t i = 0; i < drafts.size(); ++i) verify.add(drafts[i], at + 1 + static_cast<int>(i), 0, true);
      const auto t0 = Clock::now();
      LS_RETURN_IF_ERROR(decode(verify));
      length_.record_pass(static_cast<int>(verify.size()), seconds_since(t0));
      ++st_.passes;
      LS_ASSIGN_OR_RETURN(next, keep_agreed(drafts, at, sample, step));
    }
    return Status::OK();
  }

  SpeculativeStats stats() const { return st_; }

 private:
  // The source's drafts after the token at `at`, as many as fit: the
  // verification pass must not reach the context's last position, where
  // plain decoding would have stopped before it (sample() checks the
  // context's position, which the pass moves to its end).
  // Adaptive: as many as the measured costs say pay (DraftLength), maybe
  // none. The source is asked even for none, so that it follows the
  // sequence through plain passes (a later call continues from there).
  Result<std::vector<int32_t>> draft(int at) {
    const int want = opt_.adaptive ? length_.choose() : opt_.draft_max;
    const int room = std::max(0, std::min(want, ctx_.n_context() - at - 2));
    st_.draft_lengths_sum += room;
    const auto t0 = Clock::now();
    LS_ASSIGN_OR_RETURN(std::vector<int32_t> d, opt_.draft->propose(first_, tokens_, room));
    const double s = seconds_since(t0);
    st_.draft_s += s;
    if (static_cast<int>(d.size()) > room) d.resize(room);
    length_.record_draft(static_cast<int>(d.size()), s);
    return d;
  }

  // Samples from each row of the verification pass in turn: a token equal
  // to the draft at that depth is kept and the next row follows; the first
  // that differs (or the row after the last draft) is the model's own and
  // is decoded next. The KV cache keeps the pass's tokens up to the last
  // row sampled from. Returns what to decode next (empty: stopped).
  Result<Batch> keep_agreed(const std::vector<int32_t>& drafts, int at, const SampleFn& sample, int& step) {
    for (size_t j = 0; j <= drafts.size(); ++j) {
      const std::span<const float> row = ctx_.logits(static_cast<int>(j));
      c_.last_logits[0].assign(row.begin(), row.end());
      if (const RowRuleForTesting rule = row_rule_for_testing.load(std::memory_order_acquire))
        rule(c_.last_logits[0], j < drafts.size() ? drafts[j] : -1);
      Batch next = sample(step++);
      ++st_.tokens;
      const bool kept = !next.empty() && j < drafts.size() && next.tokens[0] == drafts[j];
      if (j < drafts.size() && !next.empty()) {  // judged (a stop leaves the draft unjudged)
        ++st_.drafted_at_depth[j];
        ++st_.drafted;
        length_.record_depth(static_cast<int>(j), kept);
      }
      if (kept) {
        ++st_.accepted_at_depth[j];
        ++st_.accepted;
        tokens_.push_back(drafts[j]);
        continue;
      }
      const int end = at + static_cast<int>(j) + 1;  // positions the KV cache keeps
      LS_RETURN_IF_ERROR(truncate(end));
      if (next.empty()) return next;
      Batch own;
      own.add(next.tokens[0], end, 0, true);
      return own;
    }
    return Status::Internal("speculative: a verification row was never taken");  // unreachable: j == size ends
  }

  // Forgets the sequence's positions >= end. Not Context::remove, which
  // also drops the pending token sample() may just have set.
  Status truncate(int end) {
    MutexLock lock(c_.m->pass_mu);
    return c_.m->runner->truncate(c_.slots[0], end);
  }

  Context& ctx_;
  Context::Impl& c_;
  const SpeculativeOptions& opt_;
  std::vector<int32_t> tokens_;  // the sequence from first_ on: this call's feed and generated tokens
  const int first_;
  DraftLength length_;
  SpeculativeStats st_;
};

}  // namespace

Status check(const Context& ctx, const SpeculativeOptions& o) {
  if (o.draft_max < 1 || o.draft_max > kMaxDraftTokens)
    return Status::InvalidArgument("draft_max must be in [1, " + std::to_string(kMaxDraftTokens) + "] (got " +
                                   std::to_string(o.draft_max) + ")");
  if (ctx.sequences() != 1)
    return Status::InvalidArgument("speculative decoding runs contexts of one sequence (this one has " +
                                   std::to_string(ctx.sequences()) + ")");
  return Status::OK();
}

Result<SpeculativeStats> generate(Context& ctx, Context::Impl& c, const SpeculativeOptions& o,
                                  const std::vector<int32_t>& fed, const SampleFn& sample, const DecodeFn& decode) {
  Loop loop(ctx, c, o, fed);
  LS_RETURN_IF_ERROR(loop.run(sample, decode));
  return loop.stats();
}

ScopedRowRuleForTesting::ScopedRowRuleForTesting(RowRuleForTesting rule)
    : previous_(row_rule_for_testing.exchange(rule, std::memory_order_acq_rel)) {}
ScopedRowRuleForTesting::~ScopedRowRuleForTesting() { row_rule_for_testing.store(previous_, std::memory_order_release); }

void add_to(Stats& st, const SpeculativeStats& s) {
  const double decode_tokens = st.decode_tokens_per_s * st.decode_s;
  st.decode_s += s.draft_s;
  st.decode_tokens_per_s = st.decode_s > 0 ? decode_tokens / st.decode_s : 0;
  st.speculative = s;
}

}  // namespace layerstream::speculative

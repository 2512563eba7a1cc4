// Speculative generation (speculative_loop.h): draft, verify in one pass,
// keep the longest agreed prefix, roll the KV cache back past it.
#include "runtime/llama/speculative_loop.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>

#include "kernels/kernels.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/draft_length.h"

namespace layerstream {

Result<std::vector<std::vector<int32_t>>> DraftSource::propose_tree(int first_position,
                                                                    std::span<const int32_t> tokens,
                                                                    std::span<const int> lengths) {
  std::vector<std::vector<int32_t>> tree;
  LS_ASSIGN_OR_RETURN(std::vector<int32_t> chain, propose(first_position, tokens, lengths.empty() ? 0 : lengths[0]));
  if (lengths.empty()) return tree;
  if (!chain.empty()) tree.push_back(std::move(chain));
  return tree;
}

namespace speculative {

// A verification pass carries the sampled token (once per branch) and the
// drafts; within the kernels' batch-invariant size every row gets the bits
// of a one-token pass, so greedy speculation reproduces plain greedy
// decoding exactly.
constexpr int kMaxPassTokens = kMaxDraftTokens + 1;
static_assert(kMaxPassTokens <= kernels::kBatchInvariantTokens);

namespace {

std::atomic<RowRuleForTesting> row_rule_for_testing{nullptr};  // ScopedRowRuleForTesting

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The side branches' sequences: free slots of the model's KV pool, added
// to the context's sequences while generate() runs (Batch sequence r is
// branch r) and given back after. The kept branch's slot may have become
// the context's sequence 0; whichever slots are past the first go back.
class BranchSlots {
 public:
  explicit BranchSlots(Context::Impl& c) : c_(c) {}
  ~BranchSlots() {
    if (added_ == 0) return;
    const std::vector<int> extra(c_.slots.end() - added_, c_.slots.end());
    c_.slots.resize(c_.slots.size() - added_);
    c_.last_logits.resize(c_.slots.size());
    c_.held.resize(c_.slots.size());
    c_.m->give_back(extra);
  }
  BranchSlots(const BranchSlots&) = delete;
  BranchSlots& operator=(const BranchSlots&) = delete;

  Status take(int n) {
    if (n <= 0) return Status::OK();
    auto got = c_.m->take_slots(n);
    if (!got.ok())
      return Status::OutOfBudget("a draft tree of " + std::to_string(n + 1) + " branches needs " + std::to_string(n) +
                                 " free KV sequences of the model's pool for its side branches (ModelOptions::sequences): " +
                                 got.status().message());
    c_.slots.insert(c_.slots.end(), got->begin(), got->end());
    c_.last_logits.resize(c_.slots.size());
    c_.held.resize(c_.slots.size());  // tokens of the new slots: none known
    added_ = n;
    return Status::OK();
  }

 private:
  Context::Impl& c_;
  int added_ = 0;
};

// One pass's draft tree as decoded: branch r is Batch sequence r; row[r][d]
// is the batch index of its d-th draft (the sampled token is index 0).
struct Tree {
  std::vector<std::vector<int32_t>> branches;
  std::vector<std::vector<int>> row;
  int drafts() const {
    int n = 0;
    for (const auto& b : branches) n += static_cast<int>(b.size());
    return n;
  }
};

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
        length_(o.draft_max, o.branches, kMaxPassTokens),
        slots_(c) {
    st_.drafted_at_depth.assign(o.draft_max, 0);
    st_.accepted_at_depth.assign(o.draft_max, 0);
  }

  Status run(const SampleFn& sample, const DecodeFn& decode) {
    LS_RETURN_IF_ERROR(slots_.take(opt_.branches - 1));
    int step = 0;
    Batch next = sample(step++);
    while (!next.empty()) {
      const int32_t token = next.tokens[0];
      const int at = ctx_.position(0);  // where `token` goes
      tokens_.push_back(token);
      LS_ASSIGN_OR_RETURN(Tree tree, draft(at));
      LS_ASSIGN_OR_RETURN(Batch verify, verification(tree, token, at));
      const auto t0 = Clock::now();
      LS_RETURN_IF_ERROR(decode(verify));
      length_.record_pass(static_cast<int>(verify.size()), seconds_since(t0));
      ++st_.passes;
      st_.pass_tokens += static_cast<int>(verify.size());
      st_.branches += std::max<int>(1, static_cast<int>(tree.branches.size()));
      LS_ASSIGN_OR_RETURN(next, keep_agreed(tree, at, sample, step));
    }
    // The tokens kept by the last pass, for the next call's drafts.
    return opt_.draft->propose_tree(first_, tokens_, {}).status();
  }

  SpeculativeStats stats() const { return st_; }

 private:
  // Branch lengths for this pass: chosen from the measured costs
  // (adaptive), or draft_max drafts shaped to keep the most by the measured
  // acceptance (fixed; a chain when branches is 1).
  std::vector<int> shape() {
    return opt_.adaptive ? length_.choose_tree() : length_.most_kept(opt_.draft_max);
  }

  // The source's drafts after the token at `at`, as many as fit: the
  // verification pass must not reach the context's last position, where
  // plain decoding would have stopped before it (sample() checks the
  // context's position, which the pass moves to its end).
  // No branch (adaptive, where no draft pays, or no room) is a plain pass;
  // the source is asked all the same, so that it follows the sequence
  // through plain passes (a later call continues from there).
  Result<Tree> draft(int at) {
    std::vector<int> lengths = shape();
    const int room = ctx_.n_context() - at - 2;
    if (room < 1) lengths.clear();
    for (int& l : lengths) {
      l = std::min(l, room);
      st_.draft_lengths_sum += l;
    }
    const auto t0 = Clock::now();
    LS_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> branches, opt_.draft->propose_tree(first_, tokens_, lengths));
    const double s = seconds_since(t0);
    st_.draft_s += s;
    Tree tree;
    for (size_t r = 0; r < branches.size() && r < lengths.size(); ++r) {
      std::vector<int32_t>& b = branches[r];
      if (static_cast<int>(b.size()) > lengths[r]) b.resize(lengths[r]);
      const bool repeats = std::any_of(tree.branches.begin(), tree.branches.end(),
                                       [&](const std::vector<int32_t>& t) { return !b.empty() && t[0] == b[0]; });
      if (!b.empty() && !repeats) tree.branches.push_back(std::move(b));  // a repeated first token could never be kept
    }
    length_.record_draft(tree.drafts(), s);
    return tree;
  }

  // The pass: the sampled token and branch 0's drafts in sequence 0; each
  // side branch r in sequence r, a copy of sequence 0's KV cache, carrying
  // the sampled token again (no logits: sequence 0's row is the one drawn
  // from) and its drafts.
  Result<Batch> verification(Tree& tree, int32_t token, int at) {
    Batch verify;
    verify.add(token, at, 0, true);
    tree.row.assign(tree.branches.size(), {});
    for (size_t r = 0; r < tree.branches.size(); ++r) {
      if (r > 0) {
        LS_RETURN_IF_ERROR(copy_main_to(static_cast<int>(r)));
        verify.add(token, at, static_cast<int32_t>(r), false);
      }
      for (size_t d = 0; d < tree.branches[r].size(); ++d) {
        tree.row[r].push_back(static_cast<int>(verify.size()));
        verify.add(tree.branches[r][d], at + 1 + static_cast<int>(d), static_cast<int32_t>(r), true);
      }
    }
    return verify;
  }

  // Draws from the sampled token's row; the branch whose first token the
  // draw equals (if any) is followed: each of its rows is drawn from in
  // turn, a draw equal to the branch's next draft kept, the first that
  // differs (or the row after its last draft) being the model's own token,
  // decoded next. The kept branch's KV cache becomes sequence 0's, cut after
  // the last row drawn from. Returns what to decode next (empty: stopped).
  Result<Batch> keep_agreed(const Tree& tree, int at, const SampleFn& sample, int& step) {
    Batch next = draw(0, sample, step, tree.branches.empty() ? -1 : tree.branches[0][0]);
    int branch = -1;
    if (!next.empty() && !tree.branches.empty()) {
      branch = judge_first(tree, next.tokens[0]);
      if (branch > 0) {
        std::swap(c_.slots[0], c_.slots[branch]);
        std::swap(c_.held[0], c_.held[branch]);  // the tokens follow their slot
        ++st_.side_branch_kept;
      }
    }
    int kept = 0;  // drafts kept along the branch
    if (branch >= 0) {
      const std::vector<int32_t>& b = tree.branches[branch];
      tokens_.push_back(b[0]);
      for (kept = 1;; ++kept) {
        next = draw(tree.row[branch][kept - 1], sample, step, kept < static_cast<int>(b.size()) ? b[kept] : -1);
        if (next.empty() || kept == static_cast<int>(b.size())) break;
        const bool agrees = next.tokens[0] == b[kept];
        judged(kept, agrees);
        if (!agrees) break;
        tokens_.push_back(b[kept]);
      }
    }
    const int end = at + 1 + kept;  // positions the KV cache keeps
    LS_RETURN_IF_ERROR(truncate(end));
    if (next.empty()) return next;
    Batch own;
    own.add(next.tokens[0], end, 0, true);
    return own;
  }

  // The first draws's judgement of the branches' first tokens (ranks in
  // order): the branch it equals, or -1.
  int judge_first(const Tree& tree, int32_t drawn) {
    int branch = -1;
    for (size_t r = 0; r < tree.branches.size() && branch < 0; ++r) {
      const bool agrees = tree.branches[r][0] == drawn;
      if (r > 0) length_.record_alternative(static_cast<int>(r), agrees);
      if (agrees) branch = static_cast<int>(r);
    }
    judged(0, branch >= 0, /*first_branch=*/branch == 0);
    return branch;
  }

  // Figures for a draft judged at `depth` (a stop leaves a draft unjudged).
  void judged(int depth, bool kept, bool first_branch = true) {
    ++st_.drafted_at_depth[depth];
    ++st_.drafted;
    length_.record_depth(depth, depth == 0 ? first_branch : kept);
    if (!kept) return;
    ++st_.accepted_at_depth[depth];
    ++st_.accepted;
  }

  // The model's draw from row `row` of the verification pass, whose draft
  // (for a test's row rule) is `drafted`, -1 when none.
  Batch draw(int row, const SampleFn& sample, int& step, int32_t drafted) {
    const std::span<const float> logits = ctx_.logits(row);
    c_.last_logits[0].assign(logits.begin(), logits.end());
    if (const RowRuleForTesting rule = row_rule_for_testing.load(std::memory_order_acquire))
      rule(c_.last_logits[0], drafted);
    ++st_.tokens;
    return sample(step++);
  }

  // Side branch r starts from sequence 0's KV cache.
  Status copy_main_to(int r) {
    MutexLock lock(c_.m->pass_mu);
    return c_.m->runner->copy_sequence(c_.slots[0], c_.slots[r]);
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
  BranchSlots slots_;
  SpeculativeStats st_;
};

}  // namespace

Status check(const Context& ctx, const Context::Impl& c, const SpeculativeOptions& o) {
  if (o.draft_max < 1 || o.draft_max > kMaxDraftTokens)
    return Status::InvalidArgument("draft_max must be in [1, " + std::to_string(kMaxDraftTokens) + "] (got " +
                                   std::to_string(o.draft_max) + ")");
  if (o.branches < 1 || o.branches > kMaxDraftBranches)
    return Status::InvalidArgument("branches must be in [1, " + std::to_string(kMaxDraftBranches) + "] (got " +
                                   std::to_string(o.branches) + ")");
  if (o.draft_max + o.branches > kMaxPassTokens)
    return Status::InvalidArgument("a verification pass carries draft_max + branches tokens, at most " +
                                   std::to_string(kMaxPassTokens) + " (got " + std::to_string(o.draft_max) + " + " +
                                   std::to_string(o.branches) + "): lower draft_max or branches");
  if (ctx.sequences() != 1)
    return Status::InvalidArgument("speculative decoding runs contexts of one sequence (this one has " +
                                   std::to_string(ctx.sequences()) + ")");
  if (const int free = c.model->free_sequences(); o.branches - 1 > free)
    return Status::OutOfBudget("a draft tree of " + std::to_string(o.branches) + " branches needs " +
                               std::to_string(o.branches - 1) + " free KV sequences of the model's pool for its side "
                               "branches (ModelOptions::sequences), " + std::to_string(free) + " free");
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

}  // namespace speculative
}  // namespace layerstream

// How many tokens to draft per pass, from measured costs: the target's
// pass time as a function of the tokens it carries (a line fitted to the
// passes seen), the draft's time per drafted token, and the acceptance per
// depth. With a_d the share of drafts kept at depth d among those that
// reached it, k drafts yield 1 + sum_{i=1..k} prod_{d<i} a_d tokens per pass
// and cost pass(k + 1) + k * draft; the choice maximises tokens per second,
// up to the cap. Measurements are moving averages, so the choice follows
// acceptance and costs as they drift.
//
// Trees: with b_r the measured share of passes whose draw equals the rank-r
// alternative first token when ranks < r did not (b_0 = a_0), branch r is
// taken with probability prod_{s<r} (1 - b_s) * b_r and then yields
// 1 + sum_{i=2..L_r} prod_{1<=d<i} a_d of its L_r drafts (the deeper
// acceptance taken as the first branch's). A tree with branch lengths L
// costs pass(sum L + branches) + sum L * draft; choose_tree() takes the
// shape with the most tokens per second among those within the caps (a
// chain is one of them, so a tree is chosen only where it is predicted to pay).
#pragma once

#include <vector>

namespace layerstream {

class DraftLength {
 public:
  // cap: drafts per pass; max_branches: most branches of a tree; a pass
  // carries at most pass_limit tokens (drafts + branches).
  explicit DraftLength(int cap, int max_branches = 1, int pass_limit = 0);

  void record_pass(int tokens, double seconds);        // a verification pass of `tokens` tokens
  void record_draft(int drafted, double seconds);      // a proposal of `drafted` tokens
  void record_depth(int depth, bool kept);             // depth 0 = the first draft of a pass
  // A side branch's first token (rank >= 1) judged after ranks < rank missed.
  void record_alternative(int rank, bool kept);
  // Drafts for the next pass, in [1, cap]. Before any pass is measured: the cap.
  int choose() const;
  // Predicted tokens per second with k drafts (for reports and tests).
  double rate(int k) const;
  // Branch lengths for the next pass (one entry: a chain). Before any pass is
  // measured: the cap as a chain.
  std::vector<int> choose_tree() const;
  // The shape of `drafts` drafts (at most the cap) the measured acceptance
  // says keeps the most, whatever it costs (fixed draft budgets).
  std::vector<int> most_kept(int drafts) const;
  // Predicted drafted tokens kept per pass, and tokens per second, of a tree.
  double expected_tokens(const std::vector<int>& lengths) const;
  double tree_rate(const std::vector<int>& lengths) const;

 private:
  double pass_seconds(int tokens) const;  // fitted line, >= the smallest measured pass's share

  // Calls visit(lengths) for every shape within the caps.
  template <class Visit>
  void each_shape(std::vector<int>& lengths, int drafts_left, Visit&& visit) const;

  int cap_;
  int max_branches_;
  int pass_limit_;
  std::vector<double> alt_kept_;  // per rank >= 1: moving average of kept after the ranks before missed
  std::vector<double> pass_s_;   // per pass size (1..cap+1): moving average, 0 = not seen
  std::vector<double> kept_;     // per depth: moving average of kept (0..1)
  double draft_s_per_token_ = 0;
  bool drafted_ = false;
};

}  // namespace layerstream

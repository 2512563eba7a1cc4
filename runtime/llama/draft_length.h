// How many tokens to draft per pass, from measured costs: the target's
// pass time as a function of the tokens it carries (a line fitted to the
// passes seen), the draft's time per drafted token, and the acceptance per
// depth. With a_d the share of drafts kept at depth d among those that
// reached it, k drafts yield 1 + sum_{i=1..k} prod_{d<i} a_d tokens per pass
// and cost pass(k + 1) + k * draft; the choice maximises tokens per second,
// up to the cap. k = 0 (a plain one-token pass) wins where no draft pays,
// e.g. a draft that is almost never kept: then every kProbeEvery-th pass
// drafts one token all the same, so acceptance is still measured and a
// draft that starts to agree is taken up again. Measurements are moving
// averages (the first few samples of a depth plain means, so the prior
// fades fast), so the choice follows acceptance and costs as they drift.
#pragma once

#include <vector>

namespace layerstream {

class DraftLength {
 public:
  explicit DraftLength(int cap);

  void record_pass(int tokens, double seconds);        // a verification pass of `tokens` tokens
  void record_draft(int drafted, double seconds);      // a proposal of `drafted` tokens
  void record_depth(int depth, bool kept);             // depth 0 = the first draft of a pass
  // Drafts for the next pass, in [0, cap] (0: a plain pass, no draft). Before
  // any pass is measured: the cap. Call once per pass (it counts the passes
  // since the last probe).
  int choose();
  // Predicted tokens per second with k drafts (for reports and tests).
  double rate(int k) const;

 private:
  double pass_seconds(int tokens) const;  // fitted line, >= the smallest measured pass's share

  int cap_;
  std::vector<double> pass_s_;   // per pass size (1..cap+1): moving average, 0 = not seen
  std::vector<int> pass_count_;  // per pass size: passes measured (the size's weight in the fit)
  std::vector<double> kept_;     // per depth: moving average of kept (0..1)
  std::vector<int> judged_;      // per depth: drafts judged so far (the average's weight while few)
  int plain_passes_ = 0;         // passes in a row chosen plain (0 drafts), for the probe
  bool probing_ = false;         // the last choice was a probe (its draft time is not recorded)
  double draft_s_per_token_ = 0;
  int proposals_ = 0;  // proposals measured (the first one is replaced by the second)
};

}  // namespace layerstream

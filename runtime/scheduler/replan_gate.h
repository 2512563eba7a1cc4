// ReplanGate: the hysteresis of the executor's drift check.
//
// Measured per-layer compute times on a busy machine move from pass to pass
// by more than the drift threshold without the box having changed. Reacting
// to each such pass re-plans on almost every pass, and a re-plan that moves
// residents reloads them (issue 17: 12-46 re-plans in 48 tokens). The gate
// asks for two things before the placement moves:
//   1. the costs have drifted on `drift_passes` consecutive warm passes
//      (one calm pass resets the count), and then
//   2. the new plan predicts a pass at least `min_gain` faster than the
//      current plan re-evaluated under the same costs, and
//   3. (re-plans on drift) the same new placement came out of `confirmations`
//      such re-plans in a row: noise proposes a different placement each time,
//      a real change in the costs keeps proposing the same one.
// A re-plan that keeps the placement only refreshes the plan's figures: it
// loads nothing and is not counted as a move.
// Thread safety: none; owned by the executor's pass thread.
#pragma once

#include <string>
#include <utility>

namespace layerstream::sched {

struct ReplanGateOptions {
  int drift_passes = 3;    // consecutive drifted passes before a re-plan is tried (>= 1)
  double min_gain = 0.05;  // fraction of the current plan's predicted pass time a move must save
  int confirmations = 2;   // consecutive drift re-plans that must propose the same placement (>= 1)
};

class ReplanGate {
 public:
  explicit ReplanGate(ReplanGateOptions o = {}) : o_(o) {}

  // One warm pass's verdict of the drift check. True when a re-plan should be
  // tried now (the drift has lasted drift_passes passes); the count restarts.
  bool observe(bool drifted) {
    streak_ = drifted ? streak_ + 1 : 0;
    if (streak_ < (o_.drift_passes < 1 ? 1 : o_.drift_passes)) return false;
    streak_ = 0;
    return true;
  }
  // Whether a plan predicting `candidate_s` per pass is worth moving bytes
  // for, against the current plan's `current_s` under the same costs.
  bool worth_moving(double current_s, double candidate_s) const {
    return candidate_s < current_s * (1.0 - o_.min_gain);
  }
  // A drift re-plan proposes `placement` (any string that identifies it):
  // true when the last confirmations - 1 proposals were the same placement
  // (then the count restarts).
  bool confirm(std::string placement) {
    candidate_count_ = placement == candidate_ ? candidate_count_ + 1 : 1;
    candidate_ = std::move(placement);
    if (candidate_count_ < (o_.confirmations < 1 ? 1 : o_.confirmations)) return false;
    forget_candidate();
    return true;
  }
  // A re-plan that kept the placement: no candidate pending.
  void forget_candidate() {
    candidate_.clear();
    candidate_count_ = 0;
  }
  // A new plan (or a batch-class change) starts the count again.
  void reset() { streak_ = 0; }
  int streak() const { return streak_; }

 private:
  ReplanGateOptions o_;
  int streak_ = 0;
  std::string candidate_;    // the placement the last drift re-plan proposed
  int candidate_count_ = 0;  // how many in a row proposed it
};

}  // namespace layerstream::sched

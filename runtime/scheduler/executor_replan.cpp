// Executor: the re-plan policy. After warm-up the first measured costs
// re-plan once; later, costs that drift for drift_passes passes in a row
// re-plan, and a new placement is applied only when the same one is
// proposed replan_confirmations times in a row and it beats the current plan
// by replan_min_gain under the same costs (replan_gate.h). A batch-class
// change re-plans at once (executor_pass.cpp).
#include <cmath>
#include <string>

#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/executor.h"

namespace layerstream::sched {

// After warm-up: once every layer is measured, then when the costs have
// drifted for drift_passes passes in a row (replan_gate.h).
Status Executor::replan_if_due(int cls) {
  const bool warm = pass_ - epoch_pass_ >= static_cast<uint64_t>(opt_.warmup_passes);
  const bool first_measured = warm && !plan_measured_ && measured_at_sites(cls);
  const bool drift_lasted = warm && plan_measured_ && replan_gate_.observe(drifted(cls));
  if (!first_measured && !drift_lasted) return Status::OK();
  return (first_measured ? replan_confirmed(1, /*from_hints=*/true) : replan_confirmed(opt_.replan_confirmations))
      .status();
}

bool Executor::drifted(int cls) const {
  std::vector<double> now = cost_.compute_all(cls);
  double total_old = 0;
  for (double x : plan_compute_) total_old += x;
  for (int i = 0; i < n_; ++i) {
    double d = std::abs(now[i] - plan_compute_[i]);
    if (d > opt_.drift_threshold * plan_compute_[i] && d > 0.02 * total_old) return true;
  }
  Plan p = plan_;
  PlannerInput in = planner_input(cls);
  evaluate_plan(in, p);
  return std::abs(p.predicted_pass_s - plan_.predicted_pass_s) > opt_.drift_threshold * plan_.predicted_pass_s;
}

Result<bool> Executor::replan() { return replan_confirmed(1); }

Result<bool> Executor::replan_confirmed(int confirmations, bool from_hints) {
  PlannerInput in = planner_input(plan_.batch_class);
  LS_ASSIGN_OR_RETURN(Plan p, make_plan(in));
  replan_gate_.reset();
  bool keep = p.tiers == plan_.tiers && p.sites == plan_.sites && p.device_rows == plan_.device_rows && p.slots == plan_.slots &&
              p.prefetch_depth == plan_.prefetch_depth;
  bool pending = false;  // a new placement waits to be proposed again
  if (!keep) {
    // Many placements predict within noise of each other (streamed layers
    // of one size; a block that costs about the same on either site of a
    // host backend), so a new plan must beat the current one, re-evaluated
    // under the same costs, by replan_min_gain to be worth moving bytes for.
    // Without this, measurement noise makes the plan churn (every change
    // reloads residents and moves KV caches).
    Plan cur = plan_;
    evaluate_plan(in, cur);
    if (!from_hints && !replan_gate_.worth_moving(cur.predicted_pass_s, p.predicted_pass_s)) {
      keep = true;
      p = std::move(cur);
    } else if (confirmations > 1) {
      std::string placement = site_map(p) + ' ' + std::to_string(p.slots) + ' ' + std::to_string(p.prefetch_depth);
      for (Tier t : p.tiers) placement += static_cast<char>('0' + static_cast<int>(t));
      for (double f : p.device_rows) placement += ' ' + std::to_string(f);
      if (!replan_gate_.confirm(std::move(placement))) {
        LS_LOG_DEBUG("scheduler: re-plan proposes a new placement; waiting for it to be proposed again");
        keep = pending = true;
        p = std::move(cur);
      }
    }
  }
  // Pending: the plan's baseline stays, so the drift that led here is seen
  // again after drift_passes passes and the candidate proposed once more.
  if (pending) return false;
  if (keep) {
    keep_plan(p);
    return false;
  }
  LS_RETURN_IF_ERROR(apply_plan(std::move(p)));
  ++replans_;
  return true;
}

void Executor::keep_plan(const Plan& p) {
  replan_gate_.forget_candidate();
  plan_.predicted_pass_s = p.predicted_pass_s;
  plan_.lower_bound_s = p.lower_bound_s;
  plan_compute_ = cost_.compute_all(plan_.batch_class);
  plan_measured_ = measured_at_sites(plan_.batch_class);
  LS_LOG_DEBUG("scheduler: re-plan keeps the plan; predicted pass {:.3f} ms, bound {:.3f} ms",
               plan_.predicted_pass_s * 1e3, plan_.lower_bound_s * 1e3);
}

}  // namespace layerstream::sched

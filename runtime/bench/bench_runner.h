// BenchRunner: one strategy's workload, as the bench session drives it. A
// runner is created once (start-up costs excluded from the figures), then
// run_pass() is called for warm-up and measured passes, possibly interleaved
// with other runners' passes.
// Thread safety: one thread uses a runner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/scheduler/layer.h"
#include "runtime/scheduler/trace.h"

namespace layerstream::bench {

struct LayerDesc {
  std::string name;
  uint64_t bytes = 0;
  sched::Tier tier = sched::Tier::kResident;
  sched::Site site = sched::Site::kDevice;  // where its compute runs (hybrid execution)
};

struct PassOutput {
  sched::PassSummary summary;
  // This pass's trace events (executor time base, microseconds). Copies of
  // this pass's first layers may start before its first compute (prefetched
  // during the previous pass).
  std::vector<sched::TraceEvent> events;
};

class BenchRunner {
 public:
  virtual ~BenchRunner() = default;
  // Runs one pass of the workload and returns its measurements.
  virtual Result<PassOutput> run_pass() = 0;
  // describe_plan() of the plan in force now.
  virtual std::string plan_description() const = 0;
  // Layers in pass order with their current tiers.
  virtual std::vector<LayerDesc> layers() const = 0;
  // Bandwidths in the runner's cost model now (GB/s; 0 = unknown/unused).
  virtual double link_gbps() const = 0;
  virtual double disk_gbps() const = 0;
  // Bytes loaded into residents and the RAM tier so far (0 = not tracked).
  virtual uint64_t load_bytes() const { return 0; }
};

// A strategy the session runs: a name, how to make its runner, and what the
// runner holds while it exists (to decide whether all fit side by side).
struct StrategySpec {
  std::string name;
  std::string skip_reason;   // non-empty: listed as skipped, `create` never called
  uint64_t footprint_bytes = 0;  // device + pinned host bytes one runner holds
  // When creating the runner fails with OutOfBudget, list the strategy as
  // skipped with that message instead of failing the session (resident).
  bool skip_if_out_of_budget = false;
  std::function<Result<std::unique_ptr<BenchRunner>>()> create;
};

}  // namespace layerstream::bench

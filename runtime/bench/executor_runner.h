// ExecutorRunner: a BenchRunner over a sched::Executor owned elsewhere (a
// LlamaRunner, or a test's synthetic layers). One call of `step` must run
// exactly one executor pass.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/bench/bench_runner.h"
#include "runtime/scheduler/executor.h"

namespace layerstream::bench {

class ExecutorRunner : public BenchRunner {
 public:
  // `owner` keeps whatever owns `executor` alive (destroyed with this runner);
  // `names` are the layer names in executor order (may be shorter: "layer<i>").
  // The executor's trace is cleared after each pass (bounded memory).
  ExecutorRunner(std::shared_ptr<void> owner, sched::Executor& executor, std::function<Status()> step,
                 std::vector<std::string> names);

  Result<PassOutput> run_pass() override;
  std::string plan_description() const override;
  std::vector<LayerDesc> layers() const override;
  double link_gbps() const override;
  double disk_gbps() const override;
  uint64_t load_bytes() const override;

 private:
  std::shared_ptr<void> owner_;
  sched::Executor& ex_;
  std::function<Status()> step_;
  std::vector<std::string> names_;
  std::vector<sched::TraceEvent> pending_;  // events of later passes, recorded early
};

}  // namespace layerstream::bench

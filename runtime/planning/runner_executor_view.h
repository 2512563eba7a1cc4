// The executor a Llama runner would create, described without creating it:
// its options (llama::executor_options_for) and its layers as the runner's
// footprint gives them, with the marks the runner's create adds (every layer
// pinned resident under the resident strategy; blocks host_ok, their matmul
// weights as split tensors, when the options may use the host site; the head
// never). `plan` (Model::plan) and box predictions plan from its planner
// input, the one that executor plans from (sched::executor_planner_input).
// Thread safety: plain data and functions.
#pragma once

#include <vector>

#include "layerstream/status.h"
#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/scheduler/cost_model.h"
#include "runtime/scheduler/executor_options.h"
#include "runtime/scheduler/layer.h"
#include "runtime/scheduler/planner.h"

namespace layerstream::planning {

struct RunnerExecutorView {
  sched::ExecutorOptions options;
  std::vector<sched::LayerSpec> layers;  // compute is the footprint's no-op
  bool disk_direct = false;              // sched::disk_reads_direct for the device

  // The executor's planner input in `batch_class` with `cost` (which must
  // outlive the result).
  sched::PlannerInput planner_input(const sched::CostModel& cost, int batch_class) const;
};

// For `runner` options (strategy, budgets) on a device described by `device`
// (sched::device_info_for when none is open), with `fp` the footprint of the
// same options. Errors: executor_options_for's (a bad overlap slot count, a
// first-fit plan that does not fit).
Result<RunnerExecutorView> runner_executor_view(const llama::RunnerFootprint& fp, const llama::RunnerOptions& runner,
                                                const DeviceInfo& device);

}  // namespace layerstream::planning

#include "runtime/planning/runner_executor_view.h"

#include "runtime/core/status_macros.h"
#include "runtime/scheduler/planner_input.h"

namespace layerstream::planning {

sched::PlannerInput RunnerExecutorView::planner_input(const sched::CostModel& cost, int batch_class) const {
  return sched::executor_planner_input(layers, options, disk_direct, cost, batch_class);
}

Result<RunnerExecutorView> runner_executor_view(const llama::RunnerFootprint& fp, const llama::RunnerOptions& ro,
                                                const DeviceInfo& device) {
  RunnerExecutorView v;
  v.layers = fp.layers;
  if (ro.strategy == llama::Strategy::kResident)
    for (sched::LayerSpec& l : v.layers)
      if (!l.pin) l.pin = sched::Tier::kResident;
  LS_ASSIGN_OR_RETURN(v.options, llama::executor_options_for(ro, v.layers, device, fp.reserve.total()));
  const bool blocks_host_ok = sched::may_use_host_site(v.options);
  for (size_t i = 0; i < v.layers.size(); ++i) {
    sched::LayerSpec& l = v.layers[i];
    l.host_ok = blocks_host_ok && static_cast<int>(i) != fp.head_layer;
    // The footprint has no tensor offsets; the planner reads only the bytes.
    l.split_tensors.clear();
    if (l.host_ok)
      for (const llama::RunnerFootprint::Matmul& m : fp.matmuls[i]) l.split_tensors.push_back({0, m.bytes, m.n_out});
  }
  v.disk_direct = sched::disk_reads_direct(device, v.options.force_staging);
  return v;
}

}  // namespace layerstream::planning

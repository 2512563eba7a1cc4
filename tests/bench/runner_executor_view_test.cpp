// `plan` and box predictions plan from the runner's executor's own planner
// input (runner_executor_view.h): for each strategy, the view of the executor
// a runner would create, made from the footprint alone, gives the input the
// runner's real executor plans from, and the same plan.
#include "runtime/planning/runner_executor_view.h"

#include <gtest/gtest.h>

#include "runtime/llama/llama_runner.h"
#include "runtime/scheduler/executor.h"
#include "runtime/scheduler/planner_input.h"
#include "tests/common/planner_input_eq.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream::planning {
namespace {

struct Case {
  llama::Strategy strategy;
  double host_compute_factor;
  bool copies_only;  // `--staging always`: the staged disk path on the host backend
};

class RunnerExecutorViewTest : public ::testing::TestWithParam<Case> {};

TEST_P(RunnerExecutorViewTest, PlansFromTheRunnersExecutorInput) {
  const Case c = GetParam();
  testing::TempDir dir;
  const std::string path = dir.file("tiny.gguf");
  LS_ASSERT_OK(write_example_model(path, testing::tiny_llama_spec(GgmlType::Q8_0, testing::fresh_seed(), 64)));
  llama::RunnerOptions ro;
  ro.n_ctx = 64;
  ro.host_threads = 1;
  ro.strategy = c.strategy;
  ro.host_compute_factor = c.host_compute_factor;
  ro.link_gbps = 4;
  ro.disk_gbps = 2;
  ro.staging_buffer_bytes = 16 << 10;
  ro.staging_buffers = 4;
  LS_ASSERT_OK_AND_ASSIGN(llama::RunnerFootprint fp, llama::LlamaRunner::footprint(path, ro, BackendKind::kHost));
  // Room for half the layers next to the reserve: some stream, and a RAM
  // tier smaller than the streamed bytes (some come from disk).
  uint64_t layers = 0;
  for (const sched::LayerSpec& l : fp.layers) layers += sched::round_up(l.bytes, sched::kSlotAlignment);
  ro.vram_budget = std::max(fp.min_vram_budget, sched::round_up(fp.reserve.total(), sched::kSlotAlignment) + layers / 2);
  ro.ram_budget = layers / 4;
  if (c.strategy == llama::Strategy::kResident) ro.vram_budget = sched::round_up(fp.reserve.total(), 4096) + layers;

  DeviceOptions d;
  d.backend = BackendKind::kHost;
  d.host_threads = 1;
  d.copies_only = c.copies_only;
  LS_ASSERT_OK_AND_ASSIGN(auto dev, open_device(d));
  LS_ASSERT_OK_AND_ASSIGN(auto runner, llama::LlamaRunner::create(*dev, path, ro));
  sched::Executor& ex = runner->executor();
  // The view of a device that is not open: described by its backend alone.
  LS_ASSERT_OK_AND_ASSIGN(RunnerExecutorView view,
                          runner_executor_view(fp, ro, sched::device_info_for(BackendKind::kHost, c.copies_only)));
  EXPECT_EQ(view.disk_direct, !c.copies_only);
  const sched::PlannerInput in = view.planner_input(ex.cost_model(), 0);
  testing::expect_same_planner_input(in, ex.planner_input(0));
  // And so the same plan, from the same costs.
  if (view.options.plan) {
    EXPECT_EQ(view.options.plan->tiers, ex.plan().tiers);
  } else {
    LS_ASSERT_OK_AND_ASSIGN(sched::Plan p, sched::make_plan(in));
    EXPECT_EQ(p.tiers, ex.plan().tiers) << sched::describe_plan(p, in.bytes) << " vs "
                                        << sched::describe_plan(ex.plan(), in.bytes);
    EXPECT_EQ(p.sites, ex.plan().sites);
    EXPECT_EQ(p.slots, ex.plan().slots);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, RunnerExecutorViewTest,
    ::testing::Values(Case{llama::Strategy::kPlanned, 0, false}, Case{llama::Strategy::kPlanned, 0, true},
                      Case{llama::Strategy::kPlanned, 1.5, false}, Case{llama::Strategy::kHost, 0, false},
                      Case{llama::Strategy::kSerial, 0, true}, Case{llama::Strategy::kOverlap, 0, false},
                      Case{llama::Strategy::kResident, 0, false}));

}  // namespace
}  // namespace layerstream::planning

// `plan` and box predictions plan from the runner's executor's own planner
// input (runner_executor_view.h): for each strategy, the view of the executor
// a runner would create, made from the footprint alone, gives the input the
// runner's real executor plans from, and the same plan.
#include "runtime/planning/runner_executor_view.h"

#include <gtest/gtest.h>

#include <algorithm>

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

namespace layerstream::planning {
namespace {

// `planned` with its default options (no host factor) chooses sites from the
// cost inputs, as its executor would (the view's input, the executor's
// factor rule): blocks go to the host when their host compute is cheaper
// than streaming them over the link and stay on the device when the link is
// fast. Before a host cost is measured the host backend predicts it (the
// same CPU kernels on the same cores); on a GPU it is unknown until measured
// or given (a box profile's rates, or the --host-factor override).
class DefaultSitesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LS_ASSERT_OK(write_example_model(dir_.file("tiny.gguf"),
                                     testing::tiny_llama_spec(GgmlType::Q8_0, testing::fresh_seed(), 64)));
    ro_.n_ctx = 64;
    LS_ASSERT_OK_AND_ASSIGN(fp_, llama::LlamaRunner::footprint(dir_.file("tiny.gguf"), ro_, BackendKind::kHost));
    uint64_t layers = 0;
    for (const sched::LayerSpec& l : fp_.layers) layers += sched::round_up(l.bytes, sched::kSlotAlignment);
    ro_.vram_budget = std::max(fp_.min_vram_budget, sched::round_up(fp_.reserve.total(), sched::kSlotAlignment) + layers / 2);
    ro_.ram_budget = 2 * layers;
  }

  // The plan for a link of `link_bytes_per_s`, device compute `device_s` per
  // layer and, when > 0, a measured host compute `host_s` per block.
  sched::Plan plan(BackendKind backend, double link_bytes_per_s, double device_s, double host_s) {
    const DeviceInfo device = sched::device_info_for(backend);
    auto view = runner_executor_view(fp_, ro_, device);
    EXPECT_TRUE(view.ok()) << view.status().ToString();
    if (!view.ok()) return {};
    EXPECT_EQ(view->options.host_policy, sched::HostPolicy::kChoose);
    const int n = static_cast<int>(fp_.layers.size());
    sched::CostModel cost(n);
    for (int i = 0; i < n; ++i) {
      cost.record_compute(i, 0, device_s);
      if (host_s > 0 && i != fp_.head_layer) cost.record_host_compute(i, 0, host_s);
    }
    cost.set_link_bw(link_bytes_per_s);
    cost.set_host_factor(sched::host_factor_before_measurement(view->options, device));
    auto p = sched::make_plan(view->planner_input(cost, 0));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : sched::Plan{};
  }

  testing::TempDir dir_;
  llama::RunnerOptions ro_;  // the defaults: strategy planned, no host factor
  llama::RunnerFootprint fp_;
};

constexpr double kSlowLink = 1e6, kFastLink = 1e12;  // bytes/s: a block streams in ms, or in ns

TEST_F(DefaultSitesTest, HostWhenCheaperThanStreaming) {
  // 1 ms of host compute against tens of ms of link per block.
  const sched::Plan p = plan(BackendKind::kCuda, kSlowLink, 1e-4, 1e-3);
  EXPECT_GT(p.count_site(sched::Site::kHost), 0) << sched::site_map(p);
  EXPECT_FALSE(p.streams_anything()) << sched::site_map(p);
}

TEST_F(DefaultSitesTest, DeviceWhenTheLinkIsFast) {
  // The link hides behind the device compute; the host is 100x slower.
  const sched::Plan p = plan(BackendKind::kCuda, kFastLink, 1e-4, 1e-2);
  EXPECT_EQ(p.count_site(sched::Site::kHost), 0) << sched::site_map(p);
  EXPECT_TRUE(p.streams_anything()) << sched::site_map(p);
}

TEST_F(DefaultSitesTest, HostBackendPredictsHostCostsBeforeMeasuring) {
  const sched::Plan p = plan(BackendKind::kHost, kSlowLink, 1e-4, /*host_s=*/0);
  EXPECT_GT(p.count_site(sched::Site::kHost), 0) << sched::site_map(p);
  EXPECT_FALSE(p.streams_anything()) << sched::site_map(p);
}

TEST_F(DefaultSitesTest, UnknownHostCostsOnAGpuWaitForAMeasurementOrTheOverride) {
  sched::Plan p = plan(BackendKind::kCuda, kSlowLink, 1e-4, /*host_s=*/0);
  EXPECT_EQ(p.count_site(sched::Site::kHost), 0) << sched::site_map(p);
  ro_.host_compute_factor = 10;  // the override: host = 10 x device, still far below the link
  p = plan(BackendKind::kCuda, kSlowLink, 1e-4, /*host_s=*/0);
  EXPECT_GT(p.count_site(sched::Site::kHost), 0) << sched::site_map(p);
  ro_.host_compute_factor = 1e6;  // a host that slow loses to the link
  p = plan(BackendKind::kCuda, kSlowLink, 1e-4, /*host_s=*/0);
  EXPECT_EQ(p.count_site(sched::Site::kHost), 0) << sched::site_map(p);
}

}  // namespace
}  // namespace layerstream::planning

// Measured costs of hybrid execution (issue 16): the activation crossings
// around host-site layers and the two halves of a split layer become
// cost-model samples the planner uses; and the minimum VRAM budget of a
// host policy counts only the layers that must stay on the device.
//
// Timings are injected: the crossing hooks and the split layer's device half
// spin for a set time on the compute stream (measured there with events, so
// the figures are at least the injected ones and, on a loaded machine, may
// be more: the checks bound them loosely above); the split callback reports
// its host half's time itself (LayerRun::split_timing), so that figure is
// exact.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>

#include "runtime/core/status_macros.h"
#include "runtime/scheduler/executor.h"
#include "runtime/scheduler/min_budget.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream::sched {
namespace {

constexpr uint64_t KiB = 1024;

void spin_for(std::chrono::microseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  volatile double x = 1;
  while (std::chrono::steady_clock::now() < end) x = x * 1.0000001 + 1e-9;
}

TEST(HybridCosts, SplitSampleIsNormalisedToTheWholeLayer) {
  CostModel c(2);
  c.set_hint(0, 1e-3);
  // f = 0.25: the device half took 2 ms, the host half 6 ms.
  c.record_split(0, 0, 0.25, 2e-3, 6e-3);
  EXPECT_TRUE(c.measured(0, 0));
  EXPECT_TRUE(c.host_measured(0, 0));
  EXPECT_DOUBLE_EQ(c.compute_s(0, 0), 8e-3);
  EXPECT_DOUBLE_EQ(c.host_compute_s(0, 0), 8e-3);
  // At the same fraction the model gives back the longer half.
  EXPECT_DOUBLE_EQ(c.split_compute_s(0, 0, 0.25), 6e-3);
  // No host report: only the device sample; a fraction outside (0, 1): nothing.
  c.record_split(1, 0, 0.5, 3e-3, 0);
  EXPECT_DOUBLE_EQ(c.compute_s(1, 0), 6e-3);
  EXPECT_FALSE(c.host_measured(1, 0));
  c.record_split(1, 2, 1.0, 3e-3, 3e-3);
  EXPECT_FALSE(c.measured(1, 2));
}

TEST(HybridCosts, CrossingIsAnEmaThatReplacesThePrior) {
  CostModel c(1, /*ema_alpha=*/0.5);
  c.set_crossing_s(0, 1.0);  // a prior
  EXPECT_FALSE(c.crossing_measured(0));
  c.record_crossing(0, 4e-3);  // the first sample replaces it
  EXPECT_TRUE(c.crossing_measured(0));
  EXPECT_DOUBLE_EQ(c.crossing_s(0), 4e-3);
  c.record_crossing(0, 2e-3);
  EXPECT_DOUBLE_EQ(c.crossing_s(0), 3e-3);
  EXPECT_DOUBLE_EQ(c.crossing_s(3), 3e-3);  // other classes: the nearest measured
}

// The planner works from the split samples: the balanced fraction of a layer
// measured only as a split follows its measured halves.
TEST(HybridCosts, PlannerBalancesFromMeasuredHalves) {
  CostModel c(1);
  c.set_link_bw(1e12);  // the link is not the limit
  PlannerInput in;
  in.bytes = {16 << 20};
  in.spans = {16 << 20};
  in.from_file = {false};
  in.pins = {std::nullopt};
  in.host_ok = {true};
  in.split_bytes = {16 << 20};
  in.cost = &c;
  EXPECT_EQ(balanced_split(in, 0), 0);  // nothing known about the host
  // Split at f = 0.5: device half 2 ms, host half 6 ms -> device 4 ms, host 12 ms:
  // they meet at f x 4 = (1 - f) x 12, f = 0.75.
  c.record_split(0, 0, 0.5, 2e-3, 6e-3);
  EXPECT_NEAR(balanced_split(in, 0), 0.75, 1e-3);
}

// Layers of 64 KiB (one splittable tensor of 64 rows) from host memory. The
// compute callback injects: `device_us` on the compute stream (a device
// layer, or a split layer's device half), `host_us` on the host lane (a host
// layer, or the split layer's host half, which it also reports).
struct Injected {
  int device_us = 0, host_us = 0, crossing_us = 0;
  std::atomic<int> split_calls{0}, host_calls{0}, crossings{0};
  ComputeFn fn() {
    return [this](const LayerRun& run, Stream& s) -> Status {
      const int d = device_us, h = host_us;
      if (run.site == Site::kHost) {
        ++host_calls;
        return s.host_func([h] {
          spin_for(std::chrono::microseconds(h));
          return Status::OK();
        });
      }
      if (run.site == Site::kSplit) {
        ++split_calls;
        if (!run.host_lane || !run.split_timing || run.device_rows != 0.25)
          return Status::Internal("split run without its lane, timing or fraction");
        LS_RETURN_IF_ERROR(run.host_lane->host_func([h] {
          spin_for(std::chrono::microseconds(h));
          return Status::OK();
        }));
        run.split_timing->host_s += h * 1e-6;  // the host half, as the callback saw it
        return s.host_func([d] {
          spin_for(std::chrono::microseconds(d));
          return Status::OK();
        });
      }
      return s.host_func([d] {
        spin_for(std::chrono::microseconds(d / 10));
        return Status::OK();
      });
    };
  }
  std::function<Status(Stream&, int)> hook() {
    return [this](Stream& s, int) {
      ++crossings;
      const int c = crossing_us;
      return s.host_func([c] {
        spin_for(std::chrono::microseconds(c));
        return Status::OK();
      });
    };
  }
};

TEST(HybridCosts, ExecutorMeasuresCrossingsAndSplitHalves) {
  std::mt19937_64 rng(testing::fresh_seed());
  auto dev = testing::open_host_device(1);
  ASSERT_TRUE(dev);
  const int n = 4;
  std::vector<uint8_t> data = testing::random_bytes(64 * KiB, rng);
  Injected inj;
  // Tens of milliseconds, so that a thread descheduled for a few on a loaded
  // machine (or under a sanitizer) stays within the bounds below.
  inj.device_us = 30000;  // the split's device half (the longer one: the device never waits)
  inj.host_us = 12000;
  inj.crossing_us = 15000;
  std::vector<LayerSpec> layers(n);
  for (auto& l : layers) {
    l.bytes = data.size();
    l.host_data = data.data();
    l.compute = inj.fn();
    l.host_ok = true;
    l.split_tensors = {{0, data.size(), 64}};
  }
  ExecutorOptions o;
  o.vram_budget = 1 << 20;
  o.ram_budget = 1 << 20;
  o.link_gbps = 10;
  o.activations_to_host = inj.hook();
  o.activations_to_device = inj.hook();
  Plan p;
  p.tiers = {Tier::kResident, Tier::kRam, Tier::kRam, Tier::kResident};
  p.sites = {Site::kDevice, Site::kSplit, Site::kHost, Site::kDevice};
  p.device_rows = {1, 0.25, 1, 1};
  p.slots = 2;
  p.prefetch_depth = 1;
  o.plan = p;
  LS_ASSERT_OK_AND_ASSIGN(auto ex, Executor::create(*dev, std::move(layers), o));
  const CostModel& c = ex->cost_model();
  LS_ASSERT_OK(ex->run_pass());
  // Pass 0 is cold: no samples.
  EXPECT_FALSE(c.crossing_measured(0));
  EXPECT_FALSE(c.measured(1, 0));
  for (int i = 0; i < 2; ++i) LS_ASSERT_OK(ex->run_pass());
  EXPECT_EQ(inj.split_calls.load(), 3);
  EXPECT_EQ(inj.host_calls.load(), 3);
  EXPECT_EQ(inj.crossings.load(), 6);  // one into and one out of layer 2 per pass

  // The crossing: what the hooks enqueued, timed on the compute stream.
  ASSERT_TRUE(c.crossing_measured(0));
  EXPECT_GE(c.crossing_s(0), 15e-3);
  EXPECT_LT(c.crossing_s(0), 2.5 * 15e-3);  // not the layers around it (> 40 ms with them)
  // The split layer: both sites measured, normalised to the whole layer.
  ASSERT_TRUE(c.measured(1, 0));
  ASSERT_TRUE(c.host_measured(1, 0));
  EXPECT_DOUBLE_EQ(c.host_compute_s(1, 0), 12e-3 / 0.75);  // reported: exact
  EXPECT_GE(c.compute_s(1, 0), 30e-3 / 0.25);
  EXPECT_LT(c.compute_s(1, 0), 2 * 30e-3 / 0.25);
  // The simulator charges the plan those costs: the split layer at least its
  // device half, the host layer two crossings around its host compute.
  const PlannerInput in = ex->planner_input(0);
  const auto sl = make_sim_layers(in.bytes, in.spans, p.tiers, c, 0, false, p.sites, p.device_rows, in.split_bytes);
  EXPECT_NEAR(sl[1].compute_s, c.split_compute_s(1, 0, 0.25) + 8 * c.crossing_s(0), 1e-12);
  EXPECT_GE(sl[1].compute_s, 30e-3);
  EXPECT_NEAR(sl[2].compute_s, c.host_compute_s(2, 0) + 2 * c.crossing_s(0), 1e-12);
}

// A split callback that reports nothing leaves the layer unmeasured (its
// estimates stay its hints): the executor does not take the split's span for
// either site's cost.
TEST(HybridCosts, UnreportedSplitIsNoSample) {
  std::mt19937_64 rng(testing::fresh_seed());
  auto dev = testing::open_host_device(1);
  ASSERT_TRUE(dev);
  std::vector<uint8_t> data = testing::random_bytes(64 * KiB, rng);
  std::vector<LayerSpec> layers(2);
  for (auto& l : layers) {
    l.bytes = data.size();
    l.host_data = data.data();
    l.host_ok = true;
    l.compute_hint_s = 1e-3;
    l.split_tensors = {{0, data.size(), 64}};
    l.compute = [](const LayerRun&, Stream& s) { return s.host_func([] { return Status::OK(); }); };
  }
  ExecutorOptions o;
  o.vram_budget = 1 << 20;
  o.ram_budget = 1 << 20;
  o.link_gbps = 10;
  Plan p;
  p.tiers = {Tier::kRam, Tier::kResident};
  p.sites = {Site::kSplit, Site::kDevice};
  p.device_rows = {0.5, 1};
  p.slots = 2;
  p.prefetch_depth = 1;
  o.plan = p;
  LS_ASSERT_OK_AND_ASSIGN(auto ex, Executor::create(*dev, std::move(layers), o));
  for (int i = 0; i < 3; ++i) LS_ASSERT_OK(ex->run_pass());
  EXPECT_FALSE(ex->cost_model().measured(0, 0));
  EXPECT_FALSE(ex->cost_model().host_measured(0, 0));
  EXPECT_TRUE(ex->cost_model().measured(1, 0));
}

// The minimum budget of a host policy: every host-capable layer on the host,
// so only the others (here one 1 MiB "head") need VRAM; the device-only
// planner needs a window of the large layers.
TEST(HybridCosts, MinimumBudgetOfTheHostPolicy) {
  std::vector<LayerSpec> layers(5);
  for (int i = 0; i < 5; ++i) {
    layers[i].bytes = i < 4 ? 4 << 20 : 1 << 20;
    layers[i].host_ok = i < 4;
    layers[i].host_data = reinterpret_cast<const void*>(0x1000);  // sizes only
  }
  MinBudgetQuery q;
  q.reserve_bytes = 64 * KiB;
  q.ram_budget = 64 << 20;
  const uint64_t device_min = min_vram_budget(layers, q);
  q.host_policy = HostPolicy::kAll;
  const uint64_t host_min = min_vram_budget(layers, q);
  EXPECT_EQ(host_min, 64 * KiB + (1 << 20));  // the reserve and the head, resident
  EXPECT_GE(device_min, 64 * KiB + 2 * (4 << 20));  // two window slots of blocks at least
  q.host_policy = HostPolicy::kChoose;
  EXPECT_EQ(min_vram_budget(layers, q), host_min);
  EXPECT_EQ(device_span_floor(layers, HostPolicy::kAll), uint64_t{1} << 20);
  EXPECT_EQ(device_span_floor(layers, HostPolicy::kNever), uint64_t{4} << 20);
}

}  // namespace
}  // namespace layerstream::sched

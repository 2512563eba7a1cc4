// One planner input (planner_input.h): the executor and the minimum-budget
// search plan from the same input for the same options, so the minimum the
// search finds is exactly where the executor starts accepting a budget; the
// disk-path rule.
#include "runtime/scheduler/planner_input.h"

#include <gtest/gtest.h>

#include <random>

#include "runtime/scheduler/executor.h"
#include "runtime/scheduler/min_budget.h"
#include "tests/common/planner_input_eq.h"
#include "tests/common/testing.h"

namespace layerstream::sched {
namespace {

constexpr uint64_t KiB = 1024;

// Random layers: file-backed at random offsets or host memory, random sizes,
// some host-capable with a splittable tensor.
struct RandomLayers {
  testing::TempDir dir;
  std::string path = dir.file("layers.bin");
  std::vector<uint8_t> file, host;
  std::vector<LayerSpec> layers;

  RandomLayers(int n, std::mt19937_64& rng) {
    host = testing::random_bytes(256 * KiB, rng);
    for (int i = 0; i < n; ++i) {
      LayerSpec l;
      l.bytes = std::uniform_int_distribution<uint64_t>(8 * KiB, 96 * KiB)(rng);
      if (rng() % 3 != 0) {
        l.file = path;
        l.file_offset = file.size() + rng() % 5000;
        file.resize(l.file_offset + l.bytes + rng() % 3000, 7);
      } else {
        l.host_data = host.data();
      }
      l.host_ok = rng() % 2 == 0;
      if (l.host_ok) l.split_tensors = {{0, l.bytes / 2, 16}};
      l.compute = [](const LayerRun&, Stream& s) { return s.host_func([] { return Status::OK(); }); };
      layers.push_back(std::move(l));
    }
    testing::write_file(path, file);
  }
  uint64_t host_layer_bytes() const {
    uint64_t b = 0;
    for (const LayerSpec& l : layers) b += l.from_file() ? 0 : l.bytes;
    return b;
  }
};

std::unique_ptr<Device> host_device(bool copies_only) {
  DeviceOptions o;
  o.backend = BackendKind::kHost;
  o.host_threads = 1;
  o.copies_only = copies_only;
  auto d = open_device(o);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : nullptr;
}

// For random layers and options (reserve, RAM budget, serial, site policy,
// direct or staged disk reads): the search's input at a budget is the
// executor's at that budget, and the executor accepts the search's minimum
// and refuses one byte less.
TEST(PlannerInput, ExecutorAndMinimumBudgetSearchPlanFromTheSameInput) {
  std::mt19937_64 rng(testing::fresh_seed());
  for (int trial = 0; trial < 12; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    RandomLayers m(3 + static_cast<int>(rng() % 4), rng);
    const bool staged = rng() % 2 == 0;
    auto dev = host_device(staged);
    ASSERT_TRUE(dev);
    MinBudgetQuery q;
    q.reserve_bytes = rng() % 3 == 0 ? 0 : std::uniform_int_distribution<uint64_t>(1, 64 * KiB)(rng);
    // Layers in host memory live in the RAM tier unless resident: the planner
    // asks RAM for them whatever the VRAM budget.
    q.ram_budget = m.host_layer_bytes() + std::uniform_int_distribution<uint64_t>(0, 200 * KiB)(rng);
    q.disk_direct = disk_reads_direct(dev->info());
    q.serial = rng() % 4 == 0;
    q.host_policy = rng() % 3 == 0 ? HostPolicy::kChoose : HostPolicy::kNever;
    ASSERT_EQ(q.disk_direct, !staged);
    const uint64_t min = min_vram_budget(m.layers, q);

    ExecutorOptions o = min_budget_executor_options(q, min);
    o.auto_replan = false;
    o.link_gbps = 4;
    o.disk_gbps = 2;
    // A host site needs a known host cost (the search assumes one).
    if (q.host_policy != HostPolicy::kNever) o.host_compute_factor = 1;
    o.activations_to_host = o.activations_to_device = [](Stream&, int) { return Status::OK(); };
    auto ex = Executor::create(*dev, m.layers, o);
    ASSERT_TRUE(ex.ok()) << "the executor refuses the search's minimum " << min << ": " << ex.status().ToString();
    const CostModel& cost = (*ex)->cost_model();
    testing::expect_same_planner_input((*ex)->planner_input(0),
                      executor_planner_input(m.layers, min_budget_executor_options(q, min), q.disk_direct, cost, 0));
    ex->reset();

    o.vram_budget = min - 1;
    auto below = Executor::create(*dev, m.layers, o);
    ASSERT_FALSE(below.ok()) << "the executor accepts " << min - 1 << ", below the search's minimum";
    // A budget of 0 (every block on the host, nothing reserved: the minimum is
    // 1 byte) is no budget at all: InvalidArgument; any other is too small.
    if (min - 1 == 0)
      EXPECT_TRUE(below.status().IsInvalidArgument()) << below.status().ToString();
    else
      EXPECT_TRUE(below.status().IsOutOfBudget()) << below.status().ToString();
  }
}

TEST(PlannerInput, DiskReadsAreDirectOnlyIntoHostAddressableMemory) {
  EXPECT_TRUE(disk_reads_direct(device_info_for(BackendKind::kHost)));
  EXPECT_FALSE(disk_reads_direct(device_info_for(BackendKind::kHost), /*force_staging=*/true));
  EXPECT_FALSE(disk_reads_direct(device_info_for(BackendKind::kHost, /*copies_only=*/true)));
  EXPECT_FALSE(disk_reads_direct(device_info_for(BackendKind::kCuda)));
  // An open device says the same as the description of one.
  for (bool copies_only : {false, true}) {
    auto dev = host_device(copies_only);
    ASSERT_TRUE(dev);
    EXPECT_EQ(disk_reads_direct(dev->info()), disk_reads_direct(device_info_for(BackendKind::kHost, copies_only)));
  }
}

}  // namespace
}  // namespace layerstream::sched

// WindowRing: variable-size regions placed in streaming order; what each
// layer overwrites; the window a plan needs; and the simulator and planner
// sizing the window by what streams, not by the largest layer.
#include "runtime/scheduler/window_ring.h"

#include <gtest/gtest.h>

#include <random>

#include "runtime/scheduler/planner.h"
#include "runtime/scheduler/simulator.h"
#include "tests/common/testing.h"

namespace layerstream::sched {
namespace {

TEST(WindowRing, PlacesInOrderAndWrapsToTheStart) {
  WindowRing r(10, 3);
  auto a = r.place(0, 4);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.overlaps, -1);
  auto b = r.place(1, 4);
  EXPECT_EQ(b.offset, 4u);
  EXPECT_EQ(b.overlaps, -1);
  auto c = r.place(2, 3);  // 8 + 3 > 10: wraps, overwrites layer 0
  EXPECT_EQ(c.offset, 0u);
  EXPECT_EQ(c.overlaps, 0);
  auto d = r.place(3, 2);  // [3, 5): overwrites layer 1
  EXPECT_EQ(d.offset, 3u);
  EXPECT_EQ(d.overlaps, 1);
  auto e = r.place(4, 5);  // [5, 10): layer 1's old region [4, 8), still within the horizon
  EXPECT_EQ(e.offset, 5u);
  EXPECT_EQ(e.overlaps, 1);
  auto f = r.place(5, 10);  // the whole ring: the latest overlapped is layer 4
  EXPECT_EQ(f.offset, 0u);
  EXPECT_EQ(f.overlaps, 4);
  auto g = r.place(9, 2);   // layers 5 and before are past the horizon (9 - 3)
  EXPECT_EQ(g.overlaps, -1);
}

// Random spans: the reported layer is exactly the latest earlier layer
// within the horizon whose region overlaps.
TEST(WindowRing, ReportsTheLatestOverlapWithinTheHorizon) {
  std::mt19937_64 rng(testing::fresh_seed());
  for (int trial = 0; trial < 50; ++trial) {
    const uint64_t cap = 1 + rng() % 100, horizon = 1 + rng() % 6;
    WindowRing r(cap, horizon);
    struct Reg {
      uint64_t off, len;
    };
    std::vector<Reg> regs;
    for (uint64_t g = 0; g < 200; ++g) {
      const uint64_t len = 1 + rng() % cap;
      auto p = r.place(g, len);
      ASSERT_LE(p.offset + len, cap);
      int64_t latest = -1;
      for (uint64_t j = g > horizon ? g - horizon : 0; j < g; ++j)
        if (regs[j].off < p.offset + len && p.offset < regs[j].off + regs[j].len) latest = static_cast<int64_t>(j);
      EXPECT_EQ(p.overlaps, latest) << "g " << g;
      regs.push_back({p.offset, len});
    }
  }
}

TEST(WindowRing, WindowBytesIsTheLargestRunOfConsecutiveSpans) {
  EXPECT_EQ(window_bytes_for({}, 2), 0u);
  EXPECT_EQ(window_bytes_for({5, 1, 1, 1}, 1), 5u);
  EXPECT_EQ(window_bytes_for({5, 1, 1, 1}, 2), 6u);
  EXPECT_EQ(window_bytes_for({1, 1, 5, 1}, 3), 7u);
  EXPECT_EQ(window_bytes_for({1, 2, 1, 4}, 2), 5u);  // cyclic: 4 then 1
  EXPECT_EQ(window_bytes_for({3, 2}, 3), 8u);        // more slots than layers: the cycle repeats
  EXPECT_EQ(window_bytes_for({2, 2, 2}, 2), 4u);     // uniform: slots x span, as before
}

// One big streamed layer (a head) next to small blocks: the window is the
// head plus a block, not two heads, and the planner's plan says so.
TEST(WindowRing, PlannerSizesTheWindowByWhatStreams) {
  const int n = 9;
  CostModel cost(n);
  for (int i = 0; i < n; ++i) cost.set_hint(i, 1e-3);
  cost.set_link_bw(1e9);
  cost.set_disk_bw(1e9);
  PlannerInput in;
  for (int i = 0; i < n; ++i) {
    const uint64_t b = i == n - 1 ? (8u << 20) : (1u << 20);
    in.bytes.push_back(b);
    in.spans.push_back(b);
    in.from_file.push_back(true);
    in.pins.push_back(Tier::kDisk);  // everything streams
  }
  in.vram_budget = 10u << 20;  // two 8 MiB slots would not fit
  in.cost = &cost;
  in.fixed_slots = 2;
  LS_ASSERT_OK_AND_ASSIGN(Plan p, make_plan(in));
  EXPECT_EQ(p.slots, 2);
  EXPECT_EQ(p.window_bytes, 9u << 20);
  EXPECT_EQ(p.vram_bytes, 9u << 20);
  // The simulator sees the same window: the head's load waits for the
  // compute of the block two before it, not just the one before.
  SimOptions so;
  so.slots = 2;
  so.prefetch_depth = 1;
  so.window_bytes = p.window_bytes;
  std::vector<SimLayer> sl = make_sim_layers(in.bytes, in.spans, p.tiers, cost, 0, false);
  SimResult r = simulate(sl, so);
  EXPECT_GT(r.pass_s, 0);
  EXPECT_NEAR(r.pass_s, p.predicted_pass_s, 1e-12);
}

}  // namespace
}  // namespace layerstream::sched

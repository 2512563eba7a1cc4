// Planner: budgets, pins, errors, beating the baselines, re-planning on new costs.
#include "runtime/scheduler/planner.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/common/testing.h"

namespace layerstream::sched {
namespace {

constexpr uint64_t MiB = 1 << 20;

struct Case {
  std::vector<uint64_t> bytes;
  std::vector<double> compute;
  CostModel cost;
  PlannerInput in;
  void finish(uint64_t vram, uint64_t ram, double link_bw) {
    int n = static_cast<int>(bytes.size());
    cost = CostModel(n);
    for (int i = 0; i < n; ++i) cost.record_compute(i, 0, compute[i]);
    cost.set_link_bw(link_bw);
    cost.set_disk_bw(link_bw / 2);
    in.bytes = bytes;
    in.spans.clear();
    for (uint64_t b : bytes) in.spans.push_back(round_up(b, kSlotAlignment));
    in.from_file.assign(n, false);
    in.pins.assign(n, std::nullopt);
    in.vram_budget = vram;
    in.ram_budget = ram;
    in.cost = &cost;
  }
};

// Small layers with heavy compute first, big layers with light compute last:
// keeping the first layers resident saves little transfer, keeping the big
// ones saves a lot and the heavy compute hides the rest.
Case non_uniform(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  Case c;
  for (int i = 0; i < 4; ++i) c.bytes.push_back(MiB), c.compute.push_back(1.5e-3 * jitter(rng));
  for (int i = 0; i < 4; ++i) c.bytes.push_back(4 * MiB), c.compute.push_back(0.2e-3 * jitter(rng));
  for (int i = 0; i < 4; ++i) c.bytes.push_back(MiB), c.compute.push_back(0.5e-3 * jitter(rng));
  return c;
}

TEST(Planner, BeatsFirstFitAndLruOnNonUniformLayers) {
  uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  Case c = non_uniform(rng);
  c.finish(20 * MiB, 64 * MiB, 1e9);
  LS_ASSERT_OK_AND_ASSIGN(Plan p, make_plan(c.in));
  LS_ASSERT_OK_AND_ASSIGN(Plan ff, plan_first_fit(c.in, 2));
  LS_ASSERT_OK_AND_ASSIGN(Plan lru, plan_lru(c.in));
  EXPECT_LE(p.vram_bytes, c.in.vram_budget);
  EXPECT_LT(p.predicted_pass_s, 0.85 * ff.predicted_pass_s) << "seed " << seed;
  EXPECT_LT(p.predicted_pass_s, 0.85 * lru.predicted_pass_s) << "seed " << seed;
  EXPECT_GE(p.predicted_pass_s, p.lower_bound_s * (1 - 1e-9));
  // The big layers are the ones worth keeping.
  int big_resident = 0;
  for (int i = 4; i < 8; ++i) big_resident += p.tiers[i] == Tier::kResident;
  EXPECT_GE(big_resident, 2) << describe_plan(p, c.bytes);
}

TEST(Planner, RespectsBudgetsAndPinsOnRandomCases) {
  uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> nl(1, 24), kib(4, 2048), pin(0, 7);
  std::uniform_real_distribution<double> ms(0.05e-3, 3e-3);
  for (int trial = 0; trial < 60; ++trial) {
    Case c;
    int n = nl(rng);
    for (int i = 0; i < n; ++i) c.bytes.push_back(uint64_t(kib(rng)) * 1024), c.compute.push_back(ms(rng));
    uint64_t total = 0, maxb = 0;
    for (uint64_t b : c.bytes) total += round_up(b, kSlotAlignment), maxb = std::max(maxb, round_up(b, kSlotAlignment));
    c.finish(std::uniform_int_distribution<uint64_t>(2 * maxb, total + 2 * maxb)(rng), total, 2e9);
    for (int i = 0; i < n; ++i) {
      c.in.from_file[i] = (i % 2) == 0;
      int r = pin(rng);
      if (r == 0) c.in.pins[i] = Tier::kRam;
      if (r == 1 && c.in.from_file[i]) c.in.pins[i] = Tier::kDisk;
    }
    auto res = make_plan(c.in);
    ASSERT_TRUE(res.ok()) << "seed " << seed << " trial " << trial << ": " << res.status().ToString() << " n=" << n << " vram=" << c.in.vram_budget << " total=" << total << " maxb=" << maxb;
    const Plan& p = *res;
    ASSERT_LE(p.vram_bytes, c.in.vram_budget);
    ASSERT_LE(p.ram_bytes, c.in.ram_budget);
    for (int i = 0; i < n; ++i) {
      if (c.in.pins[i]) ASSERT_EQ(p.tiers[i], *c.in.pins[i]) << "layer " << i;
      if (!c.in.from_file[i]) ASSERT_NE(p.tiers[i], Tier::kDisk);
    }
    if (p.streams_anything()) {
      ASSERT_GE(p.slots, 2);
      ASSERT_EQ(p.prefetch_depth, p.slots - 1);
    }
    ASSERT_GE(p.predicted_pass_s, p.lower_bound_s * (1 - 1e-9));
  }
}

TEST(Planner, AllResidentWhenEverythingFits) {
  std::mt19937_64 rng(testing::fresh_seed());
  Case c = non_uniform(rng);
  c.finish(64 * MiB, 0, 1e9);
  LS_ASSERT_OK_AND_ASSIGN(Plan p, make_plan(c.in));
  EXPECT_EQ(p.count(Tier::kResident), 12);
  EXPECT_EQ(p.slots, 0);
}

TEST(Planner, BudgetTooSmallForOneWindowNamesBytes) {
  std::mt19937_64 rng(testing::fresh_seed());
  Case c = non_uniform(rng);
  c.finish(6 * MiB, 64 * MiB, 1e9);  // two 4 MiB slots need 8 MiB
  auto r = make_plan(c.in);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsOutOfBudget()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("need 8.00 MiB"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("available 6.00 MiB"), std::string::npos) << r.status().ToString();
}

TEST(Planner, DiskPinWithoutFileIsRejected) {
  std::mt19937_64 rng(testing::fresh_seed());
  Case c = non_uniform(rng);
  c.finish(20 * MiB, 64 * MiB, 1e9);
  c.in.pins[3] = Tier::kDisk;
  auto r = make_plan(c.in);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("layer 3"), std::string::npos);
}

TEST(Planner, RamBudgetSendsTheRestToDisk) {
  std::mt19937_64 rng(testing::fresh_seed());
  Case c = non_uniform(rng);
  c.finish(12 * MiB, 6 * MiB, 1e9);
  c.in.from_file.assign(c.bytes.size(), true);
  LS_ASSERT_OK_AND_ASSIGN(Plan p, make_plan(c.in));
  EXPECT_GT(p.count(Tier::kDisk), 0);
  EXPECT_LE(p.ram_bytes, 6 * MiB);
}

// Re-planning input: one heavy layer among light ones, room for 2 slots + 1
// resident. Streaming the heavy layer leaves the copy stream idle while it
// computes (only one copy may run ahead with 2 slots); keeping it resident
// lets its compute hide two copies. So the resident must follow the heavy
// layer when the batch class (the compute profile) changes.
TEST(Planner, NewComputeTimesChangeThePlan) {
  uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  const int n = 6;
  int ha = static_cast<int>(rng() % n), hb = static_cast<int>((ha + 1 + rng() % (n - 1)) % n);
  Case c;
  c.bytes.assign(n, 256 * 1024);
  for (int i = 0; i < n; ++i) c.compute.push_back(i == ha ? 3e-3 : 0.1e-3);  // class 0
  c.finish(3 * 256 * 1024, 64 * MiB, 0.25e9);  // ~1.05 ms per copy
  for (int i = 0; i < n; ++i) c.cost.record_compute(i, 3, i == hb ? 3e-3 : 0.1e-3);
  c.in.batch_class = 0;
  LS_ASSERT_OK_AND_ASSIGN(Plan a, make_plan(c.in));
  c.in.batch_class = 3;
  LS_ASSERT_OK_AND_ASSIGN(Plan b, make_plan(c.in));
  EXPECT_EQ(a.tiers[ha], Tier::kResident) << "seed " << seed << " " << describe_plan(a, c.bytes);
  EXPECT_EQ(b.tiers[hb], Tier::kResident) << "seed " << seed << " " << describe_plan(b, c.bytes);
  EXPECT_EQ(a.count(Tier::kResident), 1);
  EXPECT_EQ(b.count(Tier::kResident), 1);
  EXPECT_EQ(a.batch_class, 0);
  EXPECT_EQ(b.batch_class, 3);
}

TEST(CostModel, EmaAndClassFallback) {
  CostModel m(2, 0.5);
  m.set_hint(1, 7e-3);
  EXPECT_DOUBLE_EQ(m.compute_s(1, 0), 7e-3);
  m.record_compute(0, 0, 2e-3);
  m.record_compute(0, 0, 4e-3);
  EXPECT_DOUBLE_EQ(m.compute_s(0, 0), 3e-3);
  EXPECT_DOUBLE_EQ(m.compute_s(0, 4), 3e-3);  // nearest measured class
  EXPECT_FALSE(m.fully_measured(0));
  m.record_link(1000, 1e-6);
  EXPECT_DOUBLE_EQ(m.link_bw(), 1e9);
  EXPECT_EQ(batch_class(1), 0);
  EXPECT_EQ(batch_class(16), 1);
  EXPECT_EQ(batch_class(512), 3);
}

}  // namespace
}  // namespace layerstream::sched

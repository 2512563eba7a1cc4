// Simulator predictions on cases whose pass time can be worked out by hand.
#include "runtime/scheduler/simulator.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/common/testing.h"

namespace layerstream::sched {
namespace {

std::vector<SimLayer> uniform(int n, double c, double t, Tier tier = Tier::kRam) {
  std::vector<SimLayer> v(n);
  for (auto& l : v) l = {c, tier, t, 0};
  return v;
}

TEST(Simulator, UniformOverlappedIsMaxOfComputeAndTransfer) {
  uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> ms(0.1e-3, 5e-3);
  std::uniform_int_distribution<int> layers(1, 40), slots(2, 6);
  for (int trial = 0; trial < 200; ++trial) {
    int n = layers(rng), s = slots(rng);
    double c = ms(rng), t = ms(rng);
    SimOptions o;
    o.slots = s;
    o.prefetch_depth = s - 1;
    SimResult r = simulate(uniform(n, c, t), o);
    double expect = n * std::max(c, t);
    ASSERT_NEAR(r.pass_s, expect, 1e-12 * n) << "seed " << seed << " n " << n << " c " << c << " t " << t;
    ASSERT_NEAR(r.lower_bound_s, expect, 1e-12 * n);
    ASSERT_NEAR(r.total_stall_s(), n * std::max(0.0, t - c), 1e-12 * n);
  }
}

TEST(Simulator, SerialIsSumOfComputeAndTransfer) {
  uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> ms(0.1e-3, 5e-3);
  int n = 13;
  std::vector<SimLayer> v(n);
  double expect = 0;
  for (auto& l : v) {
    l = {ms(rng), Tier::kRam, ms(rng), 0};
    expect += l.compute_s + l.link_s;
  }
  SimOptions o;
  o.slots = 1;
  o.prefetch_depth = 0;
  EXPECT_NEAR(simulate(v, o).pass_s, expect, 1e-12);
}

TEST(Simulator, AllResidentIsSumOfCompute) {
  std::vector<SimLayer> v = uniform(7, 1e-3, 9e-3, Tier::kResident);
  SimOptions o;
  o.slots = 0;
  SimResult r = simulate(v, o);
  EXPECT_NEAR(r.pass_s, 7e-3, 1e-12);
  EXPECT_NEAR(r.total_stall_s(), 0, 1e-15);
}

// Two slots, layers: R (resident, compute 4) then S1, S2 streamed (compute 1,
// transfer 3). Steady state by hand: the copy stream is never blocked by a
// slot for long, so copies of S1, S2 take 3 + 3 = 6 per pass, and compute
// takes 4 + 1 + 1 = 6: the pass is 6 with R's compute hiding S1's copy.
// Serial (1 slot): copy S1 cannot start until S2 of the previous pass is done:
// per pass R(4) overlaps copy S1 (3) -> S1 computes at 4, then S2 copy 3 after
// S1 is done -> 4 + 1 + 3 + 1 = 9.
TEST(Simulator, ResidentComputeHidesTransfers) {
  std::vector<SimLayer> v = {{4, Tier::kResident, 0, 0}, {1, Tier::kRam, 3, 0}, {1, Tier::kRam, 3, 0}};
  SimOptions o;
  o.slots = 2;
  o.prefetch_depth = 1;
  o.passes = 5;
  EXPECT_NEAR(simulate(v, o).pass_s, 6, 1e-12);
  o.slots = 1;
  o.prefetch_depth = 0;
  EXPECT_NEAR(simulate(v, o).pass_s, 9, 1e-12);
}

TEST(Simulator, DirectDiskReadsNeedNoLink) {
  std::vector<SimLayer> v = uniform(5, 2, 0, Tier::kDisk);
  for (auto& l : v) l.disk_s = 3;
  SimOptions o;
  o.slots = 3;
  o.prefetch_depth = 2;
  o.disk_direct = true;
  SimResult r = simulate(v, o);
  EXPECT_NEAR(r.pass_s, 15, 1e-12);
  EXPECT_NEAR(r.lower_bound_s, 15, 1e-12);
}

// Host-backend contention: each copied byte also takes compute time, so an
// overlapped compute-bound pass costs sum(compute) + copied bytes x the
// contention (not max(compute, copies) as with independent lanes); resident
// and direct-read disk layers are not charged; zero contention changes nothing.
TEST(Simulator, CopyContentionChargesCopiedBytesToCompute) {
  std::mt19937_64 rng(testing::fresh_seed());
  const int n = 8;
  std::vector<uint64_t> bytes(n);
  for (auto& b : bytes) b = (1 + rng() % 64) << 20;
  std::vector<Tier> tiers(n, Tier::kRam);
  tiers[0] = Tier::kResident;
  tiers[n - 1] = Tier::kDisk;  // read directly into its slot: no copy
  CostModel cost(n);
  const double c = 20e-3;
  for (int i = 0; i < n; ++i) cost.record_compute(i, 0, c);
  cost.set_link_bw(100e9);  // copies far shorter than compute: compute-bound
  cost.set_disk_bw(100e9);
  SimOptions o;
  o.slots = 3;
  o.prefetch_depth = 2;
  o.disk_direct = true;
  const double plain = simulate(make_sim_layers(bytes, bytes, tiers, cost, 0, true), o).pass_s;
  EXPECT_NEAR(plain, n * c, 1e-9);
  const double per_byte = 1.0 / 5e9;  // a copied byte costs compute as a 5 GB/s stream would
  cost.set_copy_contention(per_byte);
  std::vector<SimLayer> sl = make_sim_layers(bytes, bytes, tiers, cost, 0, true);
  double copied = 0;
  for (int i = 0; i < n; ++i) {
    if (tiers[i] == Tier::kRam) copied += static_cast<double>(bytes[i]);
    EXPECT_NEAR(sl[i].compute_s, c + (tiers[i] == Tier::kRam ? bytes[i] * per_byte : 0.0), 1e-12) << "layer " << i;
  }
  EXPECT_NEAR(simulate(sl, o).pass_s, n * c + copied * per_byte, 1e-9);
}

}  // namespace
}  // namespace layerstream::sched

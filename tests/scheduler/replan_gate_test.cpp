// ReplanGate: a re-plan is tried only after the drift has lasted
// drift_passes passes in a row, and a move only pays when it saves min_gain.
#include "runtime/scheduler/replan_gate.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/common/testing.h"

namespace layerstream::sched {
namespace {

TEST(ReplanGate, DriftMustLastDriftPassesInARow) {
  ReplanGate g({/*drift_passes=*/3, /*min_gain=*/0.05});
  EXPECT_FALSE(g.observe(true));
  EXPECT_FALSE(g.observe(true));
  EXPECT_TRUE(g.observe(true)) << "third drifted pass in a row";
  EXPECT_EQ(g.streak(), 0) << "the count restarts after a re-plan is tried";
  EXPECT_FALSE(g.observe(true));
  EXPECT_FALSE(g.observe(true));
  EXPECT_FALSE(g.observe(false)) << "one calm pass resets the count";
  EXPECT_FALSE(g.observe(true));
  EXPECT_FALSE(g.observe(true));
  EXPECT_TRUE(g.observe(true));
}

// Noisy verdicts (each pass drifts with probability q, independently): the
// gate fires exactly at the ends of runs of drift_passes drifted passes.
TEST(ReplanGate, FiresOnlyAtTheEndOfEachFullRun) {
  std::mt19937_64 rng(testing::fresh_seed());
  for (int k = 1; k <= 4; ++k) {
    ReplanGate g({k, 0.05});
    int run = 0, expect_fires = 0, fires = 0;
    for (int pass = 0; pass < 2000; ++pass) {
      const bool drifted = std::bernoulli_distribution(0.6)(rng);
      run = drifted ? run + 1 : 0;
      if (run == k) {
        ++expect_fires;
        run = 0;
      }
      fires += g.observe(drifted);
    }
    EXPECT_EQ(fires, expect_fires) << "drift_passes " << k;
    EXPECT_GT(fires, 0);
  }
}

TEST(ReplanGate, AMoveMustSaveMinGain) {
  ReplanGate g({3, 0.05});
  EXPECT_TRUE(g.worth_moving(100e-3, 94e-3));
  EXPECT_FALSE(g.worth_moving(100e-3, 95.5e-3)) << "4.5% is noise";
  EXPECT_FALSE(g.worth_moving(100e-3, 100e-3));
  EXPECT_FALSE(g.worth_moving(100e-3, 120e-3));
  ReplanGate eager({1, 0.0});
  EXPECT_TRUE(eager.worth_moving(100e-3, 99.9e-3));
  EXPECT_TRUE(eager.observe(true));
}

// Noise proposes a different placement each time; a real change proposes
// the same one again. Only a placement proposed `confirmations` times in a
// row is confirmed; a kept placement forgets the pending one.
TEST(ReplanGate, APlacementMustBeProposedAgainInARow) {
  ReplanGate g({3, 0.05, /*confirmations=*/2});
  EXPECT_FALSE(g.confirm("RRSS"));
  EXPECT_FALSE(g.confirm("RSRS")) << "a different proposal starts again";
  EXPECT_TRUE(g.confirm("RSRS"));
  EXPECT_FALSE(g.confirm("RSRS")) << "the count restarts after a confirmation";
  g.forget_candidate();
  EXPECT_FALSE(g.confirm("RSRS")) << "forgotten after a kept placement";
  EXPECT_TRUE(g.confirm("RSRS"));
  ReplanGate once({3, 0.05, 1});
  EXPECT_TRUE(once.confirm("SSSS"));
  EXPECT_TRUE(once.confirm("RRRR"));
}

}  // namespace
}  // namespace layerstream::sched

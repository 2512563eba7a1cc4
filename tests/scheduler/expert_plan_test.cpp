// The expert-level cost rule and choices (expert_plan.h) on random costs:
// the hit probability and a layer's expected pass against sums written out
// here, the resident choice against every split a budget allows, and
// llama.cpp's --n-cpu-moe rule against the bytes it keeps on the device.
#include "runtime/scheduler/expert_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/common/testing.h"

namespace layerstream::sched {
namespace {

ExpertLayerCost random_layer(std::mt19937_64& rng, uint32_t count, uint32_t used, bool skewed) {
  std::uniform_real_distribution<double> u(0.5, 1.5);
  ExpertLayerCost c;
  c.count = count;
  c.used = used;
  c.expert_bytes = 1000;
  c.dense_s = 1e-4 * u(rng);
  c.device_s = 1e-6 * u(rng);
  c.host_s = 2e-5 * u(rng);
  c.link_s = 5e-5 * u(rng);
  c.crossing_s = 2e-5 * u(rng);
  if (skewed) {
    double sum = 0;
    for (uint32_t e = 0; e < count; ++e) sum += c.pick_prob.emplace_back(std::pow(u(rng), 6));
    for (double& q : c.pick_prob) q *= used / sum;
  }
  return c;
}

TEST(ExpertPlan, HitProbabilityAndTokensPerHit) {
  std::mt19937_64 rng(testing::fresh_seed());
  for (int trial = 0; trial < 20; ++trial) {
    const double q = std::uniform_real_distribution<double>(1e-3, 0.9)(rng);
    const int tokens = std::uniform_int_distribution<int>(1, 600)(rng);
    long double miss = 1;
    for (int t = 0; t < tokens; ++t) miss *= 1 - static_cast<long double>(q);
    EXPECT_NEAR(expert_hit_probability(q, tokens), static_cast<double>(1 - miss), 1e-12);
  }
  EXPECT_DOUBLE_EQ(uniform_tokens_per_hit(128, 8, 1), 1.0);
  const double p = 1 - std::pow(1 - 8.0 / 128, 256);
  EXPECT_NEAR(uniform_tokens_per_hit(128, 8, 256), 256 * (8.0 / 128) / p, 1e-9);
}

// Uniform routing: used x k / count hits resident, the rest on the host, and
// the round trip unless no host expert is hit ((1 - q)^(count - k) for one token).
TEST(ExpertPlan, LayerSecondsIsTheExpectedWorkOnEachSite) {
  std::mt19937_64 rng(testing::fresh_seed());
  for (int trial = 0; trial < 10; ++trial) {
    const ExpertLayerCost c = random_layer(rng, 64, 4, false);
    const uint32_t k = std::uniform_int_distribution<uint32_t>(0, 63)(rng);
    const double q = 4.0 / 64;
    const double host = c.dense_s + 4.0 * k / 64 * c.device_s + 4.0 * (64 - k) / 64 * c.host_s +
                        (1 - std::pow(1 - q, 64 - k)) * c.crossing_s;
    EXPECT_NEAR(expert_layer_seconds(c, {k, ExpertRest::kHost}, 1), host, 1e-12);
    const double fetched = c.dense_s + 4.0 * k / 64 * c.device_s + 4.0 * (64 - k) / 64 * (c.link_s + c.device_s);
    EXPECT_NEAR(expert_layer_seconds(c, {k, ExpertRest::kFetched}, 1), fetched, 1e-12);
    EXPECT_NEAR(expert_layer_fetch_bytes(c, {k, ExpertRest::kFetched}, 1), 4.0 * (64 - k) / 64 * 1000, 1e-6);
    EXPECT_NEAR(expert_layer_seconds(c, {64, ExpertRest::kHost}, 1), c.dense_s + 4 * c.device_s, 1e-12);
  }
}

// Two layers: the choice is the best split of the budget found by trying
// every one, and more budget never predicts a slower pass.
TEST(ExpertPlan, ResidentChoiceMatchesTheBestSplit) {
  std::mt19937_64 rng(testing::fresh_seed());
  for (int trial = 0; trial < 12; ++trial) {
    const bool skewed = trial % 2 == 1;
    std::vector<ExpertLayerCost> costs = {random_layer(rng, 16, 2, skewed), random_layer(rng, 16, 2, skewed)};
    costs[1].expert_bytes = trial % 3 == 0 ? 1000 : 1300;  // equal and unequal expert sizes
    const uint64_t budget = std::uniform_int_distribution<uint64_t>(0, 40000)(rng);
    double best = 1e30;
    for (uint32_t a = 0; a <= 16; ++a)
      for (uint32_t b = 0; b <= 16 && a * 1000 + b * costs[1].expert_bytes <= budget; ++b)
        best = std::min(best, evaluate_experts(costs, {{a, ExpertRest::kHost}, {b, ExpertRest::kHost}}, 1, 0).pass_s);
    const ExpertPlan plan = plan_resident_experts(costs, budget, 1, 0);
    EXPECT_LE(plan.resident_bytes, budget);
    EXPECT_NEAR(plan.pass_s, best, 1e-9 * best) << "trial " << trial << " budget " << budget;
  }
  const std::vector<ExpertLayerCost> costs = {random_layer(rng, 32, 4, true), random_layer(rng, 32, 4, false),
                                              random_layer(rng, 32, 4, true)};
  double previous = 1e30;
  for (uint64_t budget = 0; budget <= 96 * 1000; budget += 4000) {
    const ExpertPlan plan = plan_resident_experts(costs, budget, 1, 1e-3);
    EXPECT_LE(plan.pass_s, previous * (1 + 1e-12)) << budget;
    previous = plan.pass_s;
  }
}

// Skewed routing: the resident experts are the most picked, so a layer with
// a few resident saves more than its share of the hits.
TEST(ExpertPlan, SkewedRoutingKeepsTheMostPickedResident) {
  ExpertLayerCost c;
  c.count = 8;
  c.used = 1;
  c.expert_bytes = 10;
  c.device_s = 1;
  c.host_s = 11;
  c.pick_prob = {0.01, 0.5, 0.01, 0.3, 0.01, 0.1, 0.05, 0.02};
  // Two resident: experts 1 and 3, 0.8 of the hits at device speed.
  EXPECT_NEAR(expert_layer_seconds(c, {2, ExpertRest::kHost}, 1), 0.8 * 1 + 0.2 * 11, 1e-12);
}

// --n-cpu-moe N: the first N layers' experts on the host, the rest resident;
// the smallest N whose resident experts fit.
TEST(ExpertPlan, NCpuMoeIsTheSmallestNThatFits) {
  std::mt19937_64 rng(testing::fresh_seed());
  std::vector<ExpertLayerCost> costs;
  for (int i = 0; i < 6; ++i) costs.push_back(random_layer(rng, 8, 2, false));
  for (int i = 0; i < 6; ++i) costs[i].expert_bytes = 100 + 10 * i;
  auto resident_bytes = [&](int n) {
    uint64_t b = 0;
    for (int i = n; i < 6; ++i) b += 8 * costs[i].expert_bytes;
    return b;
  };
  for (uint64_t budget : {uint64_t{0}, uint64_t{800}, uint64_t{3000}, uint64_t{5000}, uint64_t{100000}}) {
    const int n = smallest_n_cpu_moe(costs, budget);
    EXPECT_LE(resident_bytes(n), budget);
    if (n > 0) EXPECT_GT(resident_bytes(n - 1), budget);
    const ExpertPlan plan = n_cpu_moe_plan(costs, n, 1, 0.5);
    double expected = 0.5;
    for (int i = 0; i < 6; ++i) {
      const ExpertLayerCost& c = costs[i];
      expected += c.dense_s + (i < n ? 2 * c.host_s + (1 - std::pow(0.75, 8)) * c.crossing_s : 2 * c.device_s);
    }
    EXPECT_NEAR(plan.pass_s, expected, 1e-12);
    EXPECT_EQ(plan.resident_bytes, resident_bytes(n));
  }
  // Batches of 32 tokens or more: llama.cpp copies the host experts to the device.
  const ExpertPlan big = n_cpu_moe_plan(costs, 6, kLlamaCppOpOffloadMinBatch, 0);
  for (const ExpertLayerPlacement& l : big.layers) EXPECT_EQ(l.rest, ExpertRest::kFetched);
}

}  // namespace
}  // namespace layerstream::sched

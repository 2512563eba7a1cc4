// SamplerChain, one test per parameter: on crafted logits, the distribution
// the chain draws from (SamplerChain::distribution) equals the one each
// stage's definition gives, computed here in double from the same logits;
// draws follow that distribution; the seed is random unless given; every
// out-of-range value is refused by validate_sampling naming its field;
// token_logprob is the log-softmax of the raw row.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "layerstream/sampler.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

using ::testing::HasSubstr;
using Dist = std::vector<std::pair<int32_t, double>>;

// Twelve tokens with distinct logits, positive and negative.
const std::vector<float> kLogits = {1.5f, -0.5f, 3.0f, 0.25f, 2.2f, -2.0f, 0.9f, 2.9f, -1.1f, 0.0f, 1.2f, 0.6f};

// Everything off but what the test sets: top_k 0, top_p 1, min_p 0, temperature 1.
SamplingOptions neutral() { return {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 1}; }

// softmax(x / t) over the ids in `keep` (all when empty), as (id, p) sorted
// by p descending.
Dist softmax_over(const std::vector<double>& x, std::vector<int32_t> keep = {}, double t = 1.0) {
  if (keep.empty()) {
    keep.resize(x.size());
    std::iota(keep.begin(), keep.end(), 0);
  }
  double max = -INFINITY, sum = 0;
  for (int32_t id : keep) max = std::max(max, x[id] / t);
  for (int32_t id : keep) sum += std::exp(x[id] / t - max);
  Dist d;
  for (int32_t id : keep) d.emplace_back(id, std::exp(x[id] / t - max) / sum);
  std::sort(d.begin(), d.end(), [](auto& a, auto& b) { return a.second > b.second; });
  return d;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void expect_dist_eq(const Dist& got, const Dist& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << "rank " << i;
    EXPECT_NEAR(got[i].second, want[i].second, 1e-6) << "rank " << i;
  }
}

Dist dist_of(const SamplingOptions& o, const std::vector<float>& logits = kLogits) {
  return SamplerChain::from(o).distribution(logits);
}

TEST(SamplerParams, TemperatureDividesTheLogits) {
  for (float t : {0.3f, 1.0f, 1.7f}) {
    SamplingOptions o = neutral();
    o.temperature = t;
    expect_dist_eq(dist_of(o), softmax_over(as_double(kLogits), {}, t));
  }
  // Lower temperature sharpens: the top token's probability grows.
  SamplingOptions cold = neutral(), hot = neutral();
  cold.temperature = 0.3f;
  hot.temperature = 1.7f;
  EXPECT_GT(dist_of(cold)[0].second, dist_of(hot)[0].second);
  // 0: greedy, the argmax with certainty.
  SamplingOptions greedy = neutral();
  greedy.temperature = 0;
  expect_dist_eq(dist_of(greedy), {{2, 1.0}});
}

TEST(SamplerParams, TopKKeepsTheKLargest) {
  SamplingOptions o = neutral();
  o.top_k = 3;
  expect_dist_eq(dist_of(o), softmax_over(as_double(kLogits), {2, 7, 4}));
}

TEST(SamplerParams, TopPKeepsTheSmallestPrefixReachingP) {
  const Dist all = softmax_over(as_double(kLogits));
  for (float p : {0.3f, 0.6f, 0.9f}) {
    std::vector<int32_t> keep;
    double cum = 0;
    for (auto [id, q] : all) {
      keep.push_back(id);
      if ((cum += q) >= p) break;
    }
    SamplingOptions o = neutral();
    o.top_p = p;
    expect_dist_eq(dist_of(o), softmax_over(as_double(kLogits), keep));
  }
}

TEST(SamplerParams, MinPDropsTokensBelowAFractionOfTheTop) {
  const Dist all = softmax_over(as_double(kLogits));
  for (float p : {0.05f, 0.3f}) {
    std::vector<int32_t> keep;
    for (auto [id, q] : all)
      if (q >= p * all[0].second) keep.push_back(id);
    SamplingOptions o = neutral();
    o.min_p = p;
    const Dist got = dist_of(o);
    expect_dist_eq(got, softmax_over(as_double(kLogits), keep));
    EXPECT_LT(got.size(), kLogits.size());
  }
}

// Locally typical sampling (Meister et al.): keep the tokens whose surprise
// is closest to the entropy until their mass passes p.
TEST(SamplerParams, TypicalPKeepsTheTokensClosestToTheEntropy) {
  const Dist all = softmax_over(as_double(kLogits));
  double entropy = 0;
  for (auto [id, q] : all) entropy -= q * std::log(q);
  std::vector<std::pair<double, int32_t>> by_shift;
  std::map<int32_t, double> p_of;
  for (auto [id, q] : all) {
    by_shift.emplace_back(std::fabs(-std::log(q) - entropy), id);
    p_of[id] = q;
  }
  std::sort(by_shift.begin(), by_shift.end());
  for (float p : {0.2f, 0.4f}) {
    std::vector<int32_t> keep;
    double cum = 0;
    for (auto [shift, id] : by_shift) {
      keep.push_back(id);
      if ((cum += p_of[id]) > p) break;
    }
    SamplingOptions o = neutral();
    o.typical_p = p;
    const Dist got = dist_of(o);
    expect_dist_eq(got, softmax_over(as_double(kLogits), keep));
    // Not top-p: the kept tokens are not the most likely ones.
    std::vector<int32_t> top(keep.size());
    for (size_t i = 0; i < keep.size(); ++i) top[i] = all[i].first;
    std::sort(keep.begin(), keep.end());
    std::sort(top.begin(), top.end());
    EXPECT_NE(keep, top);
  }
}

// The penalties see the last repeat_last_n accepted tokens only.
TEST(SamplerParams, RepeatPenaltyDividesPositiveAndMultipliesNegativeLogitsInTheWindow) {
  SamplingOptions o = neutral();
  o.repeat_penalty = 1.8f;
  o.repeat_last_n = 3;
  SamplerChain c = SamplerChain::from(o);
  for (int32_t t : {7, 2, 5, 1}) c.accept(t);  // 7 is outside the window of 3
  std::vector<double> want = as_double(kLogits);
  for (int32_t id : {2, 5, 1}) want[id] = want[id] > 0 ? want[id] / 1.8 : want[id] * 1.8;
  const Dist got = c.distribution(kLogits);
  expect_dist_eq(got, softmax_over(want));
  EXPECT_EQ(got[0].first, 7);  // 3.0 / 1.8 falls below 2.9
}

TEST(SamplerParams, PresenceAndFrequencyPenaltiesSubtractPerOccurrence) {
  SamplingOptions o = neutral();
  o.presence_penalty = 0.5f;
  o.frequency_penalty = 0.75f;
  o.repeat_last_n = -1;  // the whole history
  SamplerChain c = SamplerChain::from(o);
  for (int32_t t : {2, 2, 4, 2}) c.accept(t);
  std::vector<double> want = as_double(kLogits);
  want[2] -= 3 * 0.75 + 0.5;
  want[4] -= 1 * 0.75 + 0.5;
  expect_dist_eq(c.distribution(kLogits), softmax_over(want));
  // Negative values favour repeats.
  o.presence_penalty = -1.0f;
  o.frequency_penalty = 0;
  SamplerChain fav = SamplerChain::from(o);
  fav.accept(9);
  std::vector<double> boosted = as_double(kLogits);
  boosted[9] += 1.0;
  expect_dist_eq(fav.distribution(kLogits), softmax_over(boosted));
}

TEST(SamplerParams, LogitBiasAddsToTheLogitAndMinusInfinityBans) {
  SamplingOptions o = neutral();
  o.logit_bias = {{5, 4.0f}, {2, -INFINITY}};
  std::vector<double> want = as_double(kLogits);
  want[5] += 4.0;
  std::vector<int32_t> keep;
  for (int32_t i = 0; i < static_cast<int32_t>(kLogits.size()); ++i)
    if (i != 2) keep.push_back(i);
  const Dist got = dist_of(o);
  expect_dist_eq(got, softmax_over(want, keep));
  // Greedy: the bias decides the argmax.
  o.temperature = 0;
  EXPECT_EQ(SamplerChain::from(o).sample(kLogits), 7);
  o.logit_bias = {{5, 10.0f}};
  EXPECT_EQ(SamplerChain::from(o).sample(kLogits), 5);
}

// The draws of sample() follow distribution(): 20000 draws, each token's
// share within 4 standard errors of its probability.
TEST(SamplerParams, DrawsFollowTheDistribution) {
  SamplingOptions o = neutral();
  o.top_k = 6;
  o.temperature = 0.8f;
  o.seed = testing::fresh_seed();
  SamplerChain c = SamplerChain::from(o);
  const Dist d = c.distribution(kLogits);
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[c.sample(kLogits)];
  for (auto [id, p] : d) EXPECT_NEAR(counts[id] / double(n), p, 4 * std::sqrt(p * (1 - p) / n) + 1e-3) << id;
  int in_dist = 0;
  for (auto [id, p] : d) in_dist += counts[id];
  EXPECT_EQ(in_dist, n);
}

// No seed: each chain draws its own, so two chains give different draws;
// a given seed repeats them.
TEST(SamplerParams, SeedIsRandomUnlessGiven) {
  const std::vector<float> flat(1000, 0.0f);
  SamplingOptions o = neutral();
  o.seed = kRandomSeed;
  SamplerChain a = SamplerChain::from(o), b = SamplerChain::from(o);
  EXPECT_NE(a.seed(), b.seed());
  std::vector<int32_t> da, db;
  for (int i = 0; i < 16; ++i) da.push_back(a.sample(flat)), db.push_back(b.sample(flat));
  EXPECT_NE(da, db);
  o.seed = a.seed();
  SamplerChain again = SamplerChain::from(o);
  std::vector<int32_t> dc;
  for (int i = 0; i < 16; ++i) dc.push_back(again.sample(flat));
  EXPECT_EQ(dc, da);
  EXPECT_EQ(SamplingOptions{}.seed, kRandomSeed);
}

TEST(SamplerParams, ValidationNamesTheFieldAndTheRange) {
  struct Case {
    SamplingOptions o;
    const char* field;
    const char* says;
  };
  auto with = [](auto edit) {
    SamplingOptions o;
    edit(o);
    return o;
  };
  const Case cases[] = {
      {with([](auto& o) { o.temperature = -0.1f; }), "temperature", ">= 0"},
      {with([](auto& o) { o.temperature = NAN; }), "temperature", "finite"},
      {with([](auto& o) { o.top_k = -1; }), "top_k", ">= 0"},
      {with([](auto& o) { o.top_p = 1.5f; }), "top_p", "(0, 1]"},
      {with([](auto& o) { o.top_p = 0.0f; }), "top_p", "(0, 1]"},
      {with([](auto& o) { o.min_p = -0.2f; }), "min_p", "[0, 1]"},
      {with([](auto& o) { o.typical_p = 0.0f; }), "typical_p", "(0, 1]"},
      {with([](auto& o) { o.repeat_penalty = 0.0f; }), "repeat_penalty", "> 0"},
      {with([](auto& o) { o.repeat_penalty = -1.0f; }), "repeat_penalty", "> 0"},
      {with([](auto& o) { o.repeat_last_n = -2; }), "repeat_last_n", ">= -1"},
      {with([](auto& o) { o.presence_penalty = INFINITY; }), "presence_penalty", "finite"},
      {with([](auto& o) { o.frequency_penalty = NAN; }), "frequency_penalty", "finite"},
      {with([](auto& o) { o.logit_bias = {{12, 1.0f}}; }), "logit_bias", "outside the vocabulary"},
      {with([](auto& o) { o.logit_bias = {{-1, 1.0f}}; }), "logit_bias", "outside the vocabulary"},
      {with([](auto& o) { o.logit_bias = {{3, NAN}}; }), "logit_bias", "finite"},
  };
  for (const Case& c : cases) {
    auto p = find_sampling_problem(c.o, 12);
    ASSERT_TRUE(p.has_value()) << c.field;
    EXPECT_EQ(p->field, c.field);
    EXPECT_THAT(p->message, HasSubstr(c.field));
    EXPECT_THAT(p->message, HasSubstr(c.says));
    const Status st = validate_sampling(c.o, 12);
    EXPECT_TRUE(st.IsInvalidArgument()) << c.field;
    EXPECT_EQ(st.message(), p->message);
  }
  // The edges of each range are valid.
  SamplingOptions edge = {.temperature = 0, .top_k = 0, .top_p = 1.0f, .min_p = 1.0f, .repeat_penalty = 0.01f,
                          .repeat_last_n = -1, .typical_p = 1.0f};
  edge.logit_bias = {{0, -INFINITY}, {11, 100.0f}};
  EXPECT_FALSE(find_sampling_problem(edge, 12).has_value());
  LS_EXPECT_OK(validate_sampling(SamplingOptions{}));
}

// log-softmax of the raw row, in double, and the top-N by logit.
TEST(TokenLogprob, IsTheLogSoftmaxOfTheRawLogits) {
  std::mt19937_64 rng(testing::fresh_seed());
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<float> row(5000);
  for (float& x : row) x = nd(rng);
  const int32_t token = static_cast<int32_t>(rng() % row.size());
  const TokenLogprob lp = token_logprob(row, token, 5);
  EXPECT_EQ(lp.token, token);
  EXPECT_NEAR(lp.logprob, testing::log_softmax_at(row, token), 1e-5);
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  ASSERT_EQ(lp.top.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(lp.top[i].first, order[i]);
    EXPECT_NEAR(lp.top[i].second, testing::log_softmax_at(row, order[i]), 1e-5);
  }
  EXPECT_TRUE(token_logprob(row, token, 0).top.empty());
}

}  // namespace
}  // namespace layerstream

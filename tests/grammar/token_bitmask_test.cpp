// TokenBitmask and apply_token_bitmask(), the sampler's mask stage, against
// a per-token reference on random masks and logits, including a vocabulary
// that is not a multiple of 32 and a head padded past the vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/grammar/token_bitmask.h"
#include "tests/common/testing.h"

namespace layerstream::grammar {
namespace {

TEST(TokenBitmask, StartsAllowingEveryTokenAndCountsOnlyTheVocabulary) {
  TokenBitmask mask(70);  // 3 words, 26 bits of the last unused
  EXPECT_EQ(mask.words().size(), 3u);
  EXPECT_EQ(mask.count_allowed(), 70);
  EXPECT_TRUE(mask.allows(0));
  EXPECT_TRUE(mask.allows(69));
  EXPECT_FALSE(mask.allows(70));
  EXPECT_FALSE(mask.allows(-1));
  mask.words()[1] = 0;  // ids 32..63 ruled out
  EXPECT_EQ(mask.count_allowed(), 38);
  EXPECT_FALSE(mask.allows(40));
  mask.allow_all();
  EXPECT_EQ(mask.count_allowed(), 70);
}

TEST(TokenBitmask, ApplySetsExactlyTheRuledOutAndPaddingLogitsToMinusInfinity) {
  const uint64_t seed = layerstream::testing::fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (int32_t vocab : {1, 31, 32, 33, 1000, 49152}) {
    for (int32_t padding : {0, 7, 64}) {
      TokenBitmask mask(vocab);
      std::bernoulli_distribution keep(0.3);
      std::vector<bool> allowed(vocab);
      for (int32_t id = 0; id < vocab; ++id) allowed[id] = keep(rng);
      for (auto& w : mask.words()) w = 0;
      for (int32_t id = 0; id < vocab; ++id)
        if (allowed[id]) mask.words()[id / 32] |= static_cast<int32_t>(1u << (id % 32));
      if (vocab > 96) {  // whole words allowed and ruled out: the two short paths
        mask.words()[1] = -1;
        mask.words()[2] = 0;
        for (int32_t id = 32; id < 64; ++id) allowed[id] = true;
        for (int32_t id = 64; id < 96; ++id) allowed[id] = false;
      }

      std::normal_distribution<float> normal;
      std::vector<float> logits(vocab + padding);
      for (float& x : logits) x = normal(rng);
      const std::vector<float> before = logits;
      apply_token_bitmask(mask, logits);
      int32_t kept = 0;
      for (int32_t id = 0; id < vocab + padding; ++id) {
        const bool ok = id < vocab && allowed[id];
        kept += ok;
        ASSERT_EQ(mask.allows(id), ok) << "id " << id;
        if (ok) {
          ASSERT_EQ(logits[id], before[id]) << "id " << id << " vocab " << vocab;
        } else {
          ASSERT_TRUE(std::isinf(logits[id]) && logits[id] < 0) << "id " << id << " vocab " << vocab;
        }
      }
      EXPECT_EQ(mask.count_allowed(), kept);
    }
  }
}

TEST(TokenBitmask, ApplyToFewerLogitsThanTheMaskTouchesOnlyThose) {
  TokenBitmask mask(100);
  for (auto& w : mask.words()) w = 0;
  std::vector<float> logits(40, 1.0f);
  apply_token_bitmask(mask, std::span<float>(logits).first(20));
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(std::isinf(logits[i]));
  for (int i = 20; i < 40; ++i) EXPECT_EQ(logits[i], 1.0f);
}

}  // namespace
}  // namespace layerstream::grammar

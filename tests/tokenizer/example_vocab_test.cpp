// The example-model vocabulary: shape, and decode(encode(t)) == t.
#include <gtest/gtest.h>

#include <set>

#include "runtime/tokenizer/example_vocab.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/common/testing.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace layerstream {
namespace {

using testing::id_of;
using testing::kSp;

TEST(ExampleVocab, ShapeForSeveralSizes) {
  for (uint32_t n : {512u, 777u, 4096u, 32000u}) {
    SCOPED_TRACE(n);
    const TokenizerVocab v = make_example_vocab(n);
    ASSERT_EQ(v.tokens.size(), n);
    ASSERT_EQ(v.scores.size(), n);
    ASSERT_EQ(v.token_types.size(), n);
    EXPECT_EQ(v.model, "llama");
    EXPECT_EQ(v.tokens[0], "<unk>");
    EXPECT_EQ(v.tokens[1], "<s>");
    EXPECT_EQ(v.tokens[2], "</s>");
    EXPECT_EQ(v.unk_id, 0);
    EXPECT_EQ(v.bos_id, 1);
    EXPECT_EQ(v.eos_id, 2);
    EXPECT_EQ(v.tokens[3], "<0x00>");
    EXPECT_EQ(v.tokens[3 + 0xAB], "<0xAB>");
    EXPECT_EQ(v.tokens[258], "<0xFF>");
    EXPECT_EQ(v.token_types[100], static_cast<int32_t>(TokenType::kByte));
    EXPECT_EQ(v.tokens[259], kSp);
    EXPECT_EQ(std::set<std::string>(v.tokens.begin(), v.tokens.end()).size(), n) << "duplicate tokens";
    float prev = 1.0f;
    for (size_t i = 259; i < n; ++i) {
      if (v.token_types[i] != static_cast<int32_t>(TokenType::kNormal)) continue;
      EXPECT_LT(v.scores[i], prev) << i;
      prev = v.scores[i];
    }
    // Deterministic.
    EXPECT_EQ(make_example_vocab(n).tokens, v.tokens);
  }
}

TEST(ExampleVocab, TooSmallIsAnError) {
  auto r = try_make_example_vocab(511);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("511"), std::string::npos);
  EXPECT_DEATH((void)make_example_vocab(100), "below the minimum");
}

TEST(ExampleVocab, MergesCommonWords) {
  const TokenizerVocab v = make_example_vocab(2048);
  auto t = Tokenizer::create(v);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->encode("hello world", true),
            (std::vector<int32_t>{1, id_of(v, std::string(kSp) + "hello"), id_of(v, std::string(kSp) + "world")}));
}

TEST(ExampleVocab, RandomTextRoundTrips) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  for (uint32_t n : {512u, 1500u, 32000u}) {
    auto t = Tokenizer::create(make_example_vocab(n));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (int i = 0; i < 300; ++i) {
      const std::string s = testing::random_utf8(rng, 60);
      const std::vector<int32_t> ids = (*t)->encode(s, /*add_special=*/true);
      ASSERT_EQ((*t)->decode(ids), s) << "n=" << n << " seed=" << seed;
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < static_cast<int32_t>(n));
    }
  }
}

}  // namespace
}  // namespace layerstream

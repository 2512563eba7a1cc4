// TokenStreamDecoder: only complete, well-formed UTF-8 ever comes out.
#include <gtest/gtest.h>

#include "runtime/tokenizer/example_vocab.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"
#include "tests/common/testing.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace layerstream {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kByte0 = 3;  // <0x00> in spm_vocab and the example vocabulary
const std::string kFFFD = "\xEF\xBF\xBD";

std::unique_ptr<Tokenizer> example_tokenizer(uint32_t n = 1024) {
  auto t = Tokenizer::create(make_example_vocab(n));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

TEST(TokenStreamDecoder, HoldsBackASplitMultibyteCharacter) {
  auto t = example_tokenizer();
  TokenStreamDecoder d(*t);
  // "é" = C3 A9 as two byte tokens.
  EXPECT_EQ(d.push(kByte0 + 0xC3), "");
  EXPECT_EQ(d.push(kByte0 + 0xA9), "\xC3\xA9");
  // "😀" = F0 9F 98 80, one byte per token: nothing until the last byte.
  EXPECT_EQ(d.push(kByte0 + 0xF0), "");
  EXPECT_EQ(d.push(kByte0 + 0x9F), "");
  EXPECT_EQ(d.push(kByte0 + 0x98), "");
  EXPECT_EQ(d.push(kByte0 + 0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.finish(), "");
}

TEST(TokenStreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  auto t = example_tokenizer();
  TokenStreamDecoder d(*t);
  EXPECT_EQ(d.push(kByte0 + 0xFF), kFFFD);        // never valid: replaced at once
  EXPECT_EQ(d.push(kByte0 + 0x80), kFFFD);        // lone continuation byte
  EXPECT_EQ(d.push(kByte0 + 0xE2), "");           // could still become a character
  EXPECT_EQ(d.push(kByte0 + 'A'), kFFFD + "A");   // ...but 'A' breaks it
  EXPECT_EQ(d.push(kByte0 + 0xED), "");
  EXPECT_EQ(d.push(kByte0 + 0xA0), kFFFD + kFFFD); // ED A0 would be a surrogate
  EXPECT_EQ(d.push(kByte0 + 0xF0), "");
  EXPECT_EQ(d.push(kByte0 + 0x9F), "");
  EXPECT_EQ(d.finish(), kFFFD + kFFFD);           // truncated at the end
}

TEST(TokenStreamDecoder, StripsThePrefixSpaceLikeDecode) {
  auto t = example_tokenizer();
  const Ids ids = t->encode("hello world", /*add_special=*/true);
  TokenStreamDecoder d(*t);
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  out += d.finish();
  EXPECT_EQ(out, "hello world");
  EXPECT_EQ(out, t->decode(ids));
  // After finish() the next text is a new one.
  for (int32_t id : ids) out += d.push(id);
  EXPECT_EQ(out + d.finish(), "hello worldhello world");
}

TEST(TokenStreamDecoder, RandomTextNeverEmitsBrokenUtf8) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  auto t = example_tokenizer(700);
  for (int i = 0; i < 300; ++i) {
    const std::string s = testing::random_utf8(rng, 30);
    TokenStreamDecoder d(*t);
    std::string all;
    for (int32_t id : t->encode(s, false)) {
      const std::string chunk = d.push(id);
      ASSERT_TRUE(utf8::is_valid(chunk)) << "seed=" << seed;
      all += chunk;
    }
    const std::string tail = d.finish();
    ASSERT_TRUE(utf8::is_valid(tail));
    ASSERT_EQ(all + tail, s) << "seed=" << seed;
  }
}

TEST(TokenStreamDecoder, RandomTokenSequencesAlwaysGiveValidUtf8) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  auto t = example_tokenizer(600);
  std::uniform_int_distribution<int32_t> byte_tok(kByte0, kByte0 + 255);
  std::uniform_int_distribution<int32_t> any_tok(-2, t->vocab_size() + 2);
  for (int i = 0; i < 300; ++i) {
    TokenStreamDecoder d(*t);
    std::string all;
    for (int k = 0; k < 20; ++k) {
      const int32_t id = rng() % 4 == 0 ? any_tok(rng) : byte_tok(rng);
      const std::string chunk = d.push(id);
      ASSERT_TRUE(utf8::is_valid(chunk)) << "seed=" << seed;
      all += chunk;
    }
    all += d.finish();
    ASSERT_TRUE(utf8::is_valid(all)) << "seed=" << seed;
  }
}

}  // namespace
}  // namespace layerstream

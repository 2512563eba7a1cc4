// Byte-level BPE ("gpt2") tokenizer on vocabularies built here.
#include <gtest/gtest.h>

#include "runtime/tokenizer/tokenizer.h"
#include "tests/common/testing.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace layerstream {
namespace {

using testing::bpe_vocab;
using testing::gpt2_char;
using testing::gpt2_map;
using testing::id_of;
using testing::make_tokenizer;
using Ids = std::vector<int32_t>;

TEST(BpeTokenizer, GptByteMappingMatchesTheDefinition) {
  // Spot checks of bytes_to_unicode: space -> Ġ (U+0120), newline -> Ċ (U+010A), 'a' -> 'a'.
  EXPECT_EQ(gpt2_char(' '), "\xC4\xA0");
  EXPECT_EQ(gpt2_char('\n'), "\xC4\x8A");
  EXPECT_EQ(gpt2_char('a'), "a");
  EXPECT_EQ(gpt2_char(0xAD), "\xC5\x83");  // U+0143: the 68th unprintable byte (0-32, 127-160, 173)
}

TEST(BpeTokenizer, MergesApplyInRankOrder) {
  // "abc" is one word. With "b c" ranked first: bc, then "a bc" is no merge -> [a, bc].
  auto v1 = bpe_vocab({"ab", "bc"}, {"b c", "a b"}, "default");
  auto t1 = make_tokenizer(v1);
  EXPECT_EQ(t1->encode("abc", false), (Ids{'a', id_of(v1, "bc")}));
  // With "a b" ranked first: ab, then "ab c" is no merge -> [ab, c].
  auto v2 = bpe_vocab({"ab", "bc"}, {"a b", "b c"}, "default");
  auto t2 = make_tokenizer(v2);
  EXPECT_EQ(t2->encode("abc", false), (Ids{id_of(v2, "ab"), 'c'}));
}

TEST(BpeTokenizer, MergesChainAndRespectWordBoundaries) {
  const std::string G = gpt2_char(' ');
  // " the" -> Ġ t h e; merges: "t h" (0), "Ġ th" (1), "Ġth e" (2) -> Ġthe.
  auto v = bpe_vocab({"th", G + "th", G + "the"}, {"t h", G + " th", G + "th e"}, "default");
  auto t = make_tokenizer(v);
  EXPECT_EQ(t->encode(" the", false), (Ids{id_of(v, G + "the")}));
  // "the the": words "the" and " the"; the first has no Ġ, so th + e.
  EXPECT_EQ(t->encode("the the", false), (Ids{id_of(v, "th"), 'e', id_of(v, G + "the")}));
  // A merge never crosses a pre-tokenizer boundary: "t" "h" split by "1".
  EXPECT_EQ(t->encode("t1h", false), (Ids{'t', '1', 'h'}));
  EXPECT_EQ(t->decode(t->encode("the the", false)), "the the");
}

TEST(BpeTokenizer, EveryAsciiByteRoundTripsAndInvalidBytesBecomeReplacementCharacters) {
  auto t = make_tokenizer(bpe_vocab({}, {}, "default"));
  std::string ascii;
  for (int b = 0; b < 128; ++b) ascii.push_back(static_cast<char>(b));
  const Ids ids = t->encode(ascii, false);
  ASSERT_EQ(ids.size(), 128u);
  for (int b = 0; b < 128; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(t->decode(ids), ascii);
  // As llama.cpp: a byte that is not UTF-8 is encoded as U+FFFD (EF BF BD).
  EXPECT_EQ(t->encode("\xFF", false), (Ids{0xEF, 0xBF, 0xBD}));
  EXPECT_EQ(t->encode("a\x80", false), (Ids{'a', 0xEF, 0xBF, 0xBD}));
}

TEST(BpeTokenizer, RandomTextRoundTripsForEveryPreTokenizer) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  const std::string G = gpt2_char(' ');
  for (const char* pre : {"default", "llama3", "smollm"}) {
    auto t = make_tokenizer(bpe_vocab({G + "t", "he", G + "the"}, {G + " t", "h e", G + "t he"}, pre));
    for (int i = 0; i < 200; ++i) {
      const std::string s = testing::random_utf8(rng, 40);
      ASSERT_EQ(t->decode(t->encode(s, false)), s) << "pre=" << pre << " seed=" << seed;
    }
  }
}

TEST(BpeTokenizer, Llama3WholeWordTokenSkipsMerges) {
  // No merges at all, but "hello" is a token: llama3 (ignore_merges) emits it whole,
  // default falls back to single characters.
  auto vl = bpe_vocab({"hello"}, {}, "llama3");
  EXPECT_EQ(make_tokenizer(vl)->encode("hello", false), (Ids{id_of(vl, "hello")}));
  auto vd = bpe_vocab({"hello"}, {}, "default");
  EXPECT_EQ(make_tokenizer(vd)->encode("hello", false), (Ids{'h', 'e', 'l', 'l', 'o'}));
}

TEST(BpeTokenizer, SpecialTokensAndEog) {
  auto v = bpe_vocab({}, {}, "llama3");
  v.add_bos = true;
  auto t = make_tokenizer(v);
  const int32_t eot_text = id_of(v, "<|endoftext|>");
  const int32_t eot = id_of(v, "<|eot_id|>");
  EXPECT_EQ(t->encode("a<|eot_id|>", true, true), (Ids{eot_text, 'a', eot}));
  // Without parse_special the marker is plain text: < | eot _ id | > by llama3 words.
  const Ids plain = t->encode("<|eot_id|>", false, false);
  EXPECT_EQ(plain.size(), 10u);
  EXPECT_EQ(t->decode(plain), "<|eot_id|>");
  EXPECT_TRUE(t->is_eog(eot));
  EXPECT_TRUE(t->is_eog(eot_text));
  EXPECT_FALSE(t->is_eog('a'));
  EXPECT_EQ(t->decode(Ids{eot_text, 'a', eot}), "a");
}

TEST(BpeTokenizer, LongerSpecialTokensAreCutOutFirstAsLlamaCpp) {
  // "ab" and "bcd" overlap in "abcd": llama.cpp cuts the longer one out first.
  auto v = bpe_vocab({"ab", "bcd"}, {}, "gpt-2");
  v.token_types[id_of(v, "ab")] = static_cast<int32_t>(TokenType::kUserDefined);
  v.token_types[id_of(v, "bcd")] = static_cast<int32_t>(TokenType::kUserDefined);
  auto t = make_tokenizer(v);
  EXPECT_EQ(t->encode("abcd", false), (Ids{'a', id_of(v, "bcd")}));
  EXPECT_EQ(t->encode("abxab", false), (Ids{id_of(v, "ab"), 'x', id_of(v, "ab")}));
}

TEST(BpeTokenizer, Phi3SpecialTokensEatTheWhitespaceAfterThem) {
  auto v = bpe_vocab({}, {}, "gpt-2");
  const int32_t eot = id_of(v, "<|eot_id|>"), text_end = id_of(v, "<|endoftext|>");
  // Without the model name: the spaces stay (" " then " b" by GPT-2 words).
  EXPECT_EQ(make_tokenizer(v)->encode("a<|eot_id|>  b", false, true), (Ids{'a', eot, ' ', ' ', 'b'}));
  // Phi-3 (by general.name, as llama.cpp): rstrip on every special but
  // <unk>, <s> and <|endoftext|>; only with parse_special is it a token at all.
  v.model_name = "Phi-3 Mini 4k Instruct";
  auto t = make_tokenizer(v);
  EXPECT_EQ(t->encode("a<|eot_id|>  \n b", false, true), (Ids{'a', eot, 'b'}));
  EXPECT_EQ(t->encode("<|endoftext|> b", false, true), (Ids{text_end, ' ', 'b'}));
  EXPECT_EQ(t->encode("<|eot_id|> b", false, false).size(), 12u);  // plain text, spaces kept
}

TEST(BpeTokenizer, RejectsUnknownPreAndBadMerges) {
  auto v = bpe_vocab({}, {}, "qwen9");
  auto r = Tokenizer::create(v);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsUnsupported());
  EXPECT_NE(r.status().message().find("'qwen9'"), std::string::npos) << r.status().ToString();

  auto m = bpe_vocab({}, {"ab"}, "default");
  auto rm = Tokenizer::create(m);
  ASSERT_FALSE(rm.ok());
  EXPECT_TRUE(rm.status().IsCorruption());
  EXPECT_NE(rm.status().message().find("merge 0"), std::string::npos) << rm.status().ToString();

  auto nb = bpe_vocab({}, {}, "default");
  nb.tokens[0x41] = "A-not-a-byte";  // byte 'A' loses its token, no <unk>
  auto rb = Tokenizer::create(nb);
  ASSERT_FALSE(rb.ok());
  EXPECT_TRUE(rb.status().IsUnsupported());
  EXPECT_NE(rb.status().message().find("0x41"), std::string::npos) << rb.status().ToString();
}

}  // namespace
}  // namespace layerstream

// SentencePiece ("llama") tokenizer on vocabularies built here.
#include <algorithm>
#include <gtest/gtest.h>

#include "runtime/tokenizer/tokenizer.h"
#include "tests/common/testing.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace layerstream {
namespace {

using testing::id_of;
using testing::make_tokenizer;
using testing::kSp;
using testing::spm_vocab;
using Ids = std::vector<int32_t>;

std::string sp(const std::string& s) { return std::string(kSp) + s; }

TEST(SpmTokenizer, MergesTheHighestScoringPairFirst) {
  // "abc" -> symbols ▁ a b c; candidate pairs ▁a, ab, bc.
  // bc scores highest: bc, then ▁a (▁abc/abc are not pieces) -> [▁a, bc].
  auto v1 = spm_vocab({{kSp, -1}, {"a", -2}, {"b", -3}, {"c", -4}, {sp("a"), -10}, {"ab", -20}, {"bc", -5}});
  auto t1 = make_tokenizer(v1);
  EXPECT_EQ(t1->encode("abc", false), (Ids{id_of(v1, sp("a")), id_of(v1, "bc")}));
  // ab scores highest: ab first, then no pair of ▁ ab c is a piece -> [▁, ab, c].
  auto v2 = spm_vocab({{kSp, -1}, {"a", -2}, {"b", -3}, {"c", -4}, {sp("a"), -10}, {"ab", -5}, {"bc", -20}});
  auto t2 = make_tokenizer(v2);
  EXPECT_EQ(t2->encode("abc", false), (Ids{id_of(v2, kSp), id_of(v2, "ab"), id_of(v2, "c")}));
  EXPECT_EQ(t1->decode(t1->encode("abc", false)), "abc");
  EXPECT_EQ(t2->decode(t2->encode("abc", false)), "abc");
}

TEST(SpmTokenizer, EqualScoresMergeLeftmostFirst) {
  // "aaa" -> ▁ a a a; pairs (a,a) at positions 1-2 and 2-3 tie; the leftmost merges.
  auto v = spm_vocab({{kSp, -1}, {"a", -2}, {"aa", -3}});
  auto t = make_tokenizer(v);
  EXPECT_EQ(t->encode("aaa", false), (Ids{id_of(v, kSp), id_of(v, "aa"), id_of(v, "a")}));
}

TEST(SpmTokenizer, ByteFallbackForCharactersNotInTheVocabulary) {
  auto v = spm_vocab({{kSp, -1}, {"a", -2}, {sp("a"), -3}});
  auto t = make_tokenizer(v);
  // é = C3 A9; <0xXX> has id 3 + XX.
  EXPECT_EQ(t->encode("a\xC3\xA9", false), (Ids{id_of(v, sp("a")), 3 + 0xC3, 3 + 0xA9}));
  // 😀 = F0 9F 98 80, preceded by the ▁ prefix.
  EXPECT_EQ(t->encode("\xF0\x9F\x98\x80", false), (Ids{id_of(v, kSp), 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}));
  EXPECT_EQ(t->decode(t->encode("a\xC3\xA9", false)), "a\xC3\xA9");
  // Invalid UTF-8 bytes also go through byte fallback and come back unchanged.
  const std::string bad = "a\xFF\xC3(\x80";
  EXPECT_EQ(t->decode(t->encode(bad, false)), bad);
}

TEST(SpmTokenizer, InvalidLeadBytesTakeTheBytesTheyAnnounceAsLlamaCpp) {
  auto v = spm_vocab({{kSp, -1}, {"(", -2}, {"x", -2}});
  auto t = make_tokenizer(v);
  // C3 announces a 2-byte character: "\xC3(" is one symbol, not a piece, so
  // both its bytes fall back (the "(" is not merged on its own).
  EXPECT_EQ(t->encode("\xC3(", false), (Ids{id_of(v, kSp), 3 + 0xC3, 3 + 0x28}));
  // C3 swallows the first byte of a literal "▁" (E2 96 81); the next literal
  // "▁" is still kept apart as bytes.
  EXPECT_EQ(t->encode("\xC3\xE2\x96\x81x\xE2\x96\x81", false),
            (Ids{id_of(v, kSp), 3 + 0xC3, 3 + 0xE2, 3 + 0x96, 3 + 0x81, id_of(v, "x"), 3 + 0xE2, 3 + 0x96, 3 + 0x81}));
}

TEST(SpmTokenizer, UnknownTokenWhenNoByteTokens) {
  auto v = spm_vocab({{kSp, -1}, {"a", -2}}, /*with_bytes=*/false);
  auto t = make_tokenizer(v);
  // One <unk> per character that is not a piece.
  EXPECT_EQ(t->encode("a\xC3\xA9z", false), (Ids{id_of(v, kSp), id_of(v, "a"), 0, 0}));
}

TEST(SpmTokenizer, BosEosAndEmptyText) {
  auto v = spm_vocab({{kSp, -1}, {"a", -2}});
  v.add_bos = true;
  v.add_eos = true;
  auto t = make_tokenizer(v);
  EXPECT_EQ(t->encode("", true), (Ids{1, 2}));
  EXPECT_EQ(t->encode("", false), Ids{});
  EXPECT_EQ(t->encode("a", true), (Ids{1, id_of(v, kSp), id_of(v, "a"), 2}));
  EXPECT_EQ(t->decode(Ids{1, id_of(v, kSp), id_of(v, "a"), 2}), "a");  // controls render as nothing
  EXPECT_TRUE(t->is_eog(2));
  EXPECT_FALSE(t->is_eog(1));
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
}

TEST(SpmTokenizer, OnlySpacesAndLiteralSpaceMarkerRoundTrip) {
  auto v = spm_vocab({{kSp, -1}, {sp(kSp), -2}, {"a", -3}, {"b", -4}});
  auto t = make_tokenizer(v);
  // "   " -> ▁▁▁▁ -> [▁▁, ▁▁]; decode strips the one prefixed space.
  EXPECT_EQ(t->encode("   ", false), (Ids{id_of(v, sp(kSp)), id_of(v, sp(kSp))}));
  for (const std::string s : {" ", "   ", " a ", "a\xE2\x96\x81" "b", "\xE2\x96\x81", " \xE2\x96\x81 "}) {
    EXPECT_EQ(t->decode(t->encode(s, false)), s) << s;
  }
  // A literal ▁ in the input is bytes, never the space piece.
  EXPECT_EQ(t->encode("a\xE2\x96\x81", false), (Ids{id_of(v, kSp), id_of(v, "a"), 3 + 0xE2, 3 + 0x96, 3 + 0x81}));
}

TEST(SpmTokenizer, ControlTokensSplitOutOnlyWithParseSpecial) {
  auto v = spm_vocab({{kSp, -1}, {"a", -2}, {sp("a"), -3}, {"s", -4}});
  auto t = make_tokenizer(v);
  // After a special token the next fragment gets the ▁ prefix again.
  EXPECT_EQ(t->encode("<s>a", false, /*parse_special=*/true), (Ids{1, id_of(v, sp("a"))}));
  EXPECT_EQ(t->encode("a</s>", false, true), (Ids{id_of(v, sp("a")), 2}));
  // Without parse_special "<s>" is plain text: < and > by bytes, s a piece.
  EXPECT_EQ(t->encode("<s>a", false, false),
            (Ids{id_of(v, kSp), 3 + '<', id_of(v, "s"), 3 + '>', id_of(v, "a")}));
}

TEST(SpmTokenizer, UserDefinedTokensAlwaysSplitOut) {
  auto v = spm_vocab({{kSp, -1}, {"a", -2}, {sp("a"), -3}, {"b", -4}});
  v.tokens.push_back("<tool>");
  v.scores.push_back(0);
  v.token_types.push_back(static_cast<int32_t>(TokenType::kUserDefined));
  const int32_t tool = static_cast<int32_t>(v.tokens.size()) - 1;
  auto t = make_tokenizer(v);
  EXPECT_EQ(t->encode("a<tool>b", false, false), (Ids{id_of(v, sp("a")), tool, id_of(v, kSp), id_of(v, "b")}));
  EXPECT_EQ(t->decode(Ids{id_of(v, sp("a")), tool}), "a<tool>");
}

// As llama.cpp's vocabulary loader: a token named like an end of turn stops
// generation even when the file types it normal (and is then control: split
// out only with parse_special, never produced from plain text); <unk> written
// in the text is parsed as a special with parse_special.
TEST(SpmTokenizer, EndOfTurnByNameAndUnknownParsedAsSpecial) {
  auto v = spm_vocab({{kSp, -1}, {"a", -2}, {sp("a"), -3}});
  for (const char* name : {"<end_of_turn>", "<|im_end|>", "<start_of_turn>"}) {
    v.tokens.push_back(name);
    v.scores.push_back(0);
    v.token_types.push_back(static_cast<int32_t>(TokenType::kNormal));
  }
  const int32_t eot = id_of(v, "<end_of_turn>"), im_end = id_of(v, "<|im_end|>"), sot = id_of(v, "<start_of_turn>");
  auto t = make_tokenizer(v);
  EXPECT_TRUE(t->is_eog(eot));
  EXPECT_TRUE(t->is_eog(im_end));
  EXPECT_FALSE(t->is_eog(sot));
  EXPECT_TRUE(t->is_control(im_end));
  EXPECT_FALSE(t->is_control(sot));
  EXPECT_EQ(t->encode("a<|im_end|>", false, true), (Ids{id_of(v, sp("a")), im_end}));
  const Ids plain = t->encode("a<|im_end|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_end), 0);
  EXPECT_EQ(t->encode("<unk>a", false, true), (Ids{0, id_of(v, sp("a"))}));
}

TEST(SpmTokenizer, DecodeRendersUnknownAndOutOfRange) {
  auto v = spm_vocab({{kSp, -1}, {"a", -2}});
  auto t = make_tokenizer(v);
  EXPECT_EQ(t->decode(Ids{0}), "\xE2\x81\x87 ");  // " ⁇ " minus the stripped leading space
  EXPECT_EQ(t->token_to_piece(0), " \xE2\x81\x87 ");
  EXPECT_EQ(t->token_to_piece(-1), "\xEF\xBF\xBD");
  EXPECT_EQ(t->token_to_piece(t->vocab_size()), "\xEF\xBF\xBD");
  EXPECT_TRUE(t->check_ids(Ids{0, 1, t->vocab_size() - 1}).ok());
  Status s = t->check_ids(Ids{0, t->vocab_size()});
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find(std::to_string(t->vocab_size())), std::string::npos) << s.ToString();
}

TEST(TokenizerCreate, RejectsBadVocabularies) {
  auto base = [] { return spm_vocab({{kSp, -1}, {"a", -2}}); };
  {
    auto v = base();
    v.model = "bert";
    auto r = Tokenizer::create(v);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsUnsupported());
    EXPECT_NE(r.status().message().find("'bert'"), std::string::npos) << r.status().ToString();
  }
  {
    auto v = base();
    v.scores.pop_back();
    auto r = Tokenizer::create(v);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  }
  {
    auto v = base();
    v.token_types.push_back(1);
    EXPECT_TRUE(Tokenizer::create(v).status().IsCorruption());
  }
  {
    auto v = base();
    v.bos_id = static_cast<int32_t>(v.tokens.size());
    auto r = Tokenizer::create(v);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption());
    EXPECT_NE(r.status().message().find("BOS id " + std::to_string(v.tokens.size())), std::string::npos)
        << r.status().ToString();
  }
  {
    auto v = base();
    v.eos_id = -1;
    EXPECT_TRUE(Tokenizer::create(v).status().IsCorruption());
  }
  {
    auto v = base();
    v.token_types[5] = 9;
    EXPECT_TRUE(Tokenizer::create(v).status().IsCorruption());
  }
  {
    auto v = spm_vocab({{kSp, -1}}, /*with_bytes=*/false);
    v.unk_id.reset();
    auto r = Tokenizer::create(v);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsUnsupported()) << r.status().ToString();
    EXPECT_NE(r.status().message().find("0x00"), std::string::npos) << r.status().ToString();
  }
  {
    TokenizerVocab v;
    v.model = "llama";
    EXPECT_TRUE(Tokenizer::create(v).status().IsCorruption());
  }
}

}  // namespace
}  // namespace layerstream

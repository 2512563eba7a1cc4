// Pre-tokenizer splits. Every expectation below was worked out by hand from
// the family's patterns in pretokenizer.cpp (leftmost alternative that
// matches, greedy, with backtracking for \s+(?!\S)), not by running the code.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/tokenizer/pretokenizer.h"
#include "runtime/tokenizer/unicode_class.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

using Words = std::vector<std::string>;

Words split(std::string_view pre, std::string_view text) {
  auto p = find_pre_tokenizer(pre);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return {};
  std::string scratch;
  std::vector<std::string_view> words;
  pre_tokenize(**p, text, scratch, words);
  return Words(words.begin(), words.end());
}

TEST(PreTokenizer, FindsEveryFamilyByEachOfItsNames) {
  // A name and the family it selects.
  const std::vector<std::pair<std::string, std::string>> families = {
      {"", "default"},       {"default", "default"},        {"gpt2", "gpt-2"},      {"phi-2", "gpt-2"},
      {"llama-bpe", "llama3"}, {"deepseek-r1-qwen", "qwen2"}, {"stablelm2", "qwen2"}, {"command-r", "smollm"},
      {"llama4", "gpt-4o"}};
  for (const auto& [name, family] : families) EXPECT_EQ(find_pre_tokenizer(name).value()->name, family) << name;
  for (const char* n : {"llama-v3", "tekken", "glm4"}) EXPECT_TRUE(find_pre_tokenizer(n).value()->ignore_merges) << n;
  for (const char* n : {"dbrx", "chatglm-bpe"}) EXPECT_FALSE(find_pre_tokenizer(n).value()->ignore_merges) << n;
  for (const char* n : {"qwen35", "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon", "mpt", "starcoder",
                        "refact", "olmo", "exaone", "kimi-k2", "poro-chat", "viking"}) {
    EXPECT_TRUE(find_pre_tokenizer(n).ok()) << n;
  }
  const auto names = supported_pre_tokenizer_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_GE(names.size(), 60u);
}

TEST(PreTokenizer, RefusesUnknownNamesListingTheSupportedOnes) {
  auto r = find_pre_tokenizer("qwen9");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsUnsupported());
  EXPECT_TRUE(testing::contains_all(r.status().message(), {"'qwen9'", "llama-bpe", "tekken"}));
}

TEST(PreTokenizer, Gpt2) {
  const char* k = "gpt-2";
  EXPECT_EQ(split(k, ""), Words{});
  EXPECT_EQ(split(k, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split(k, "I'm here's"), (Words{"I", "'m", " here", "'s"}));
  EXPECT_EQ(split(k, "don't"), (Words{"don", "'t"}));
  // Contractions are case-sensitive: "'T" is punctuation then a letter run.
  EXPECT_EQ(split(k, "DON'T"), (Words{"DON", "'", "T"}));
  EXPECT_EQ(split(k, "they'll've"), (Words{"they", "'ll", "'ve"}));
  // \s+(?!\S) leaves the last space of a run to prefix the next word.
  EXPECT_EQ(split(k, "a  b"), (Words{"a", " ", " b"}));
  EXPECT_EQ(split(k, "end   "), (Words{"end", "   "}));
  EXPECT_EQ(split(k, "x1 23 !!"), (Words{"x", "1", " 23", " !!"}));
  EXPECT_EQ(split(k, "3.14"), (Words{"3", ".", "14"}));
  // A lone tab before a word matches nothing: it stays a piece of its own.
  EXPECT_EQ(split(k, "a\tb"), (Words{"a", "\t", "b"}));
  EXPECT_EQ(split(k, "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split(k, "h\xC3\xA9llo w\xC3\xB6rld"), (Words{"h\xC3\xA9llo", " w\xC3\xB6rld"}));
  EXPECT_EQ(split(k, "\xE4\xBD\xA0\xE5\xA5\xBD \xE4\xB8\x96"), (Words{"\xE4\xBD\xA0\xE5\xA5\xBD", " \xE4\xB8\x96"}));
  // Emoji are neither letters nor numbers: one punctuation-like run.
  EXPECT_EQ(split(k, "\xF0\x9F\x99\x82\xF0\x9F\x99\x82 ok"), (Words{"\xF0\x9F\x99\x82\xF0\x9F\x99\x82", " ok"}));
}

TEST(PreTokenizer, Llama3) {
  const char* k = "llama3";
  EXPECT_EQ(split(k, "Hello world"), (Words{"Hello", " world"}));
  // Contractions ignore case.
  EXPECT_EQ(split(k, "I'M HERE'S"), (Words{"I", "'M", " HERE", "'S"}));
  // \p{N}{1,3}: numbers in groups of at most three, no leading space.
  EXPECT_EQ(split(k, "12345"), (Words{"123", "45"}));
  EXPECT_EQ(split(k, "x 2024"), (Words{"x", " ", "202", "4"}));
  // Punctuation takes the newlines after it.
  EXPECT_EQ(split(k, "Hello, world!\n\nHow"), (Words{"Hello", ",", " world", "!\n\n", "How"}));
  // \s*[\r\n]+ ends at the last newline of the run; then \s+(?!\S).
  EXPECT_EQ(split(k, "a\n\n  b"), (Words{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(split(k, "a \r\n b"), (Words{"a", " \r\n", " b"}));
  // [^\r\n\p{L}\p{N}]?\p{L}+: one non-letter (not CR/LF) may lead a word.
  EXPECT_EQ(split(k, "$x\tfoo"), (Words{"$x", "\tfoo"}));
  EXPECT_EQ(split(k, "\nfoo"), (Words{"\n", "foo"}));
  EXPECT_EQ(split(k, "end  "), (Words{"end", "  "}));
  EXPECT_EQ(split(k, "a ... b"), (Words{"a", " ...", " b"}));
}

TEST(PreTokenizer, SmollmSplitsDigitsFirst) {
  const char* k = "smollm";
  // Digits are split first, so " 1" cannot form and the space stands alone.
  EXPECT_EQ(split(k, "a 1"), (Words{"a", " ", "1"}));
  EXPECT_EQ(split(k, "abc123def"), (Words{"abc", "1", "2", "3", "def"}));
  EXPECT_EQ(split(k, "I'm 42!"), (Words{"I", "'m", " ", "4", "2", "!"}));
  EXPECT_EQ(split(k, "x\ty"), (Words{"x", "\t", "y"}));
  EXPECT_EQ(split(k, "Hi there"), (Words{"Hi", " there"}));
}

TEST(PreTokenizer, Qwen2TakesOneDigitAtATime) {
  EXPECT_EQ(split("qwen2", "abc 12345"), (Words{"abc", " ", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("qwen2", "It's\n\n"), (Words{"It", "'s", "\n\n"}));
}

TEST(PreTokenizer, DefaultRunsLlamaCppsFourPatterns) {
  // Punctuation runs first, then GPT-2's words, digit runs, digit triples.
  EXPECT_EQ(split("default", "a+b=12345!"), (Words{"a", "+", "b", "=", "123", "45", "!"}));
}

TEST(PreTokenizer, CasedWordsOfGpt4oAndTekken) {
  EXPECT_EQ(split("gpt-4o", "HelloWorld"), (Words{"Hello", "World"}));
  EXPECT_EQ(split("gpt-4o", "ABCdef"), (Words{"ABCdef"}));
  EXPECT_EQ(split("gpt-4o", "ABC def"), (Words{"ABC", " def"}));
  EXPECT_EQ(split("gpt-4o", "Hello's 12345"), (Words{"Hello's", " ", "123", "45"}));
  EXPECT_EQ(split("gpt-4o", "x://y"), (Words{"x", "://", "y"}));
  // Tekken: no contractions, single digits.
  EXPECT_EQ(split("tekken", "I'm 2024"), (Words{"I", "'m", " ", "2", "0", "2", "4"}));
}

TEST(PreTokenizer, DeepseekV3SplitsNumbersAndCjkBeforeWords) {
  EXPECT_EQ(split("deepseek-v3", "abc 1234 \xE4\xB8\xAD\xE6\x96\x87!"),
            (Words{"abc", " ", "123", "4", " ", "\xE4\xB8\xAD\xE6\x96\x87", "!"}));
  EXPECT_EQ(split("deepseek-v3", "'s"), (Words{"'s"}));
}

TEST(PreTokenizer, KimiK2KeepsHanApartFromOtherLetters) {
  EXPECT_EQ(split("kimi-k2", "\xE4\xB8\xAD\xE6\x96\x87" "abc"), (Words{"\xE4\xB8\xAD\xE6\x96\x87", "abc"}));
  EXPECT_EQ(split("kimi-k2", "x\xE4\xB8\xAD"), (Words{"x", "\xE4\xB8\xAD"}));
}

TEST(PreTokenizer, InvalidBytesBecomeReplacementCharacters) {
  // As llama.cpp: 0xFF is not UTF-8, so it is U+FFFD (a symbol), which forms
  // a punctuation-like run with "!".
  EXPECT_EQ(split("gpt-2", "a\xFF! b"), (Words{"a", "\xEF\xBF\xBD!", " b"}));
  // A truncated sequence: each of its bytes is one U+FFFD.
  EXPECT_EQ(split("gpt-2", "x\xE4\xB8"), (Words{"x", "\xEF\xBF\xBD\xEF\xBF\xBD"}));
}

TEST(UnicodeClass, CategoriesWhitespaceAndHan) {
  EXPECT_EQ(unicode_category('a'), UCat::kLetter);
  EXPECT_EQ(unicode_category('5'), UCat::kNumber);
  EXPECT_EQ(unicode_category('_'), UCat::kPunctuation);
  EXPECT_EQ(unicode_category('$'), UCat::kSymbol);
  EXPECT_EQ(unicode_category(0xE9), UCat::kLetter);      // é
  EXPECT_EQ(unicode_category(0xD7), UCat::kSymbol);      // ×
  EXPECT_EQ(unicode_category(0x0301), UCat::kMark);      // combining acute
  EXPECT_EQ(unicode_category(0x093F), UCat::kMark);      // Devanagari vowel sign i
  EXPECT_EQ(unicode_category(0x0663), UCat::kNumber);    // Arabic-Indic three
  EXPECT_EQ(unicode_category(0x2014), UCat::kPunctuation);  // em dash
  EXPECT_EQ(unicode_category(0x1F600), UCat::kSymbol);   // 😀
  EXPECT_EQ(unicode_category(0xE000), UCat::kControl);   // private use
  EXPECT_EQ(unicode_category(0x0378), UCat::kUnassigned);
  EXPECT_EQ(unicode_category(0x110000), UCat::kUnassigned);
  EXPECT_EQ(cp_flags(' '), kCpWhitespace);
  EXPECT_EQ(cp_flags(0x3000), kCpWhitespace);
  EXPECT_EQ(cp_flags(0x4E2D), kCpLetter | kCpHan);  // 中
  EXPECT_EQ(cp_flags(0x3042), kCpLetter);           // あ: a letter, not Han
}

}  // namespace
}  // namespace layerstream

// Pre-tokenizer splits. Every expectation below was worked out by hand from
// the regex in pretokenizer.h (leftmost alternative that matches, greedy,
// with backtracking for \s+(?!\S)), not by running the code.
#include <gtest/gtest.h>

#include "runtime/tokenizer/pretokenizer.h"
#include "runtime/tokenizer/unicode_class.h"

namespace layerstream {
namespace {

using Words = std::vector<std::string>;

Words split(PreTokenizer kind, std::string_view text) {
  Words out;
  for (std::string_view w : pre_tokenize(kind, text)) out.emplace_back(w);
  return out;
}

TEST(PreTokenizer, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(parse_pre_tokenizer("").value(), PreTokenizer::kGpt2);
  EXPECT_EQ(parse_pre_tokenizer("default").value(), PreTokenizer::kGpt2);
  EXPECT_EQ(parse_pre_tokenizer("llama3").value(), PreTokenizer::kLlama3);
  EXPECT_EQ(parse_pre_tokenizer("smollm").value(), PreTokenizer::kSmollm);
  auto r = parse_pre_tokenizer("deepseek-coder");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsUnsupported());
  EXPECT_NE(r.status().message().find("deepseek-coder"), std::string::npos);
}

TEST(PreTokenizer, Gpt2) {
  const auto k = PreTokenizer::kGpt2;
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
  // A lone tab before a word: \s+(?!\S) fails, \s+ takes it.
  EXPECT_EQ(split(k, "a\tb"), (Words{"a", "\t", "b"}));
  EXPECT_EQ(split(k, "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split(k, "h\xC3\xA9llo w\xC3\xB6rld"), (Words{"h\xC3\xA9llo", " w\xC3\xB6rld"}));
  EXPECT_EQ(split(k, "\xE4\xBD\xA0\xE5\xA5\xBD \xE4\xB8\x96"), (Words{"\xE4\xBD\xA0\xE5\xA5\xBD", " \xE4\xB8\x96"}));
  // Emoji are neither letters nor numbers: one punctuation-like run.
  EXPECT_EQ(split(k, "\xF0\x9F\x99\x82\xF0\x9F\x99\x82 ok"), (Words{"\xF0\x9F\x99\x82\xF0\x9F\x99\x82", " ok"}));
}

TEST(PreTokenizer, Llama3) {
  const auto k = PreTokenizer::kLlama3;
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

TEST(PreTokenizer, Smollm) {
  const auto k = PreTokenizer::kSmollm;
  // Digits are split first, so " 1" cannot form and the space stands alone.
  EXPECT_EQ(split(k, "a 1"), (Words{"a", " ", "1"}));
  EXPECT_EQ(split(k, "abc123def"), (Words{"abc", "1", "2", "3", "def"}));
  EXPECT_EQ(split(k, "I'm 42!"), (Words{"I", "'m", " ", "4", "2", "!"}));
  EXPECT_EQ(split(k, "x\ty"), (Words{"x", "\t", "y"}));
  EXPECT_EQ(split(k, "Hi there"), (Words{"Hi", " there"}));
}

TEST(PreTokenizer, InvalidBytesAreKeptAsPunctuation) {
  // 0xFF is not UTF-8: it forms a punctuation-like run with "!".
  EXPECT_EQ(split(PreTokenizer::kGpt2, "a\xFF! b"), (Words{"a", "\xFF!", " b"}));
}

TEST(UnicodeClass, AsciiExactAndCommonRanges) {
  EXPECT_EQ(classify_code_point('a'), CpClass::kLetter);
  EXPECT_EQ(classify_code_point('Z'), CpClass::kLetter);
  EXPECT_EQ(classify_code_point('5'), CpClass::kNumber);
  EXPECT_EQ(classify_code_point(' '), CpClass::kWhitespace);
  EXPECT_EQ(classify_code_point('\v'), CpClass::kWhitespace);
  EXPECT_EQ(classify_code_point('_'), CpClass::kOther);
  EXPECT_EQ(classify_code_point(0xE9), CpClass::kLetter);     // é
  EXPECT_EQ(classify_code_point(0xD7), CpClass::kOther);      // ×
  EXPECT_EQ(classify_code_point(0xA0), CpClass::kWhitespace); // no-break space
  EXPECT_EQ(classify_code_point(0x3000), CpClass::kWhitespace);
  EXPECT_EQ(classify_code_point(0x0663), CpClass::kNumber);   // Arabic-Indic three
  EXPECT_EQ(classify_code_point(0xFF11), CpClass::kNumber);   // fullwidth one
  EXPECT_EQ(classify_code_point(0x4E2D), CpClass::kLetter);   // 中
  EXPECT_EQ(classify_code_point(0x0416), CpClass::kLetter);   // Ж
  EXPECT_EQ(classify_code_point(0x0301), CpClass::kOther);    // combining acute
  EXPECT_EQ(classify_code_point(0x2014), CpClass::kOther);    // em dash
  EXPECT_EQ(classify_code_point(0x1F600), CpClass::kOther);   // 😀
}

}  // namespace
}  // namespace layerstream

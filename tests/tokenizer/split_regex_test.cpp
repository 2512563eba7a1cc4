// The pre-tokenizer regex matcher on small patterns, against the results
// ECMAScript (std::regex) semantics give, worked out by hand.
#include <gtest/gtest.h>

#include "runtime/tokenizer/split_regex.h"
#include "runtime/tokenizer/utf8.h"

namespace layerstream {
namespace {

std::vector<Unit> units(std::string_view s) {
  std::vector<Unit> u;
  for (size_t pos = 0; pos < s.size();) {
    utf8::ScanResult r = utf8::scan(s, pos);
    u.push_back(make_unit(r.cp));
    pos += r.len;
  }
  return u;
}

// "begin:end" of the first match in s, or "none".
std::string first(std::string_view pattern, std::string_view s) {
  auto re = SplitRegex::compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status().ToString();
  if (!re.ok()) return "error";
  const std::vector<Unit> u = units(s);
  size_t b, e;
  if (!re->find(u.data(), 0, u.size(), 0, &b, &e)) return "none";
  return std::to_string(b) + ":" + std::to_string(e);
}

TEST(SplitRegex, FirstAlternativeThatMatchesWins) {
  EXPECT_EQ(first("a|ab", "ab"), "0:1");
  EXPECT_EQ(first("ab|a", "ab"), "0:2");
  EXPECT_EQ(first("x", "aax"), "2:3");
  EXPECT_EQ(first("x", "aaa"), "none");
}

TEST(SplitRegex, QuantifiersGreedyLazyAndCounted) {
  EXPECT_EQ(first("a+", "baaa"), "1:4");
  EXPECT_EQ(first("a+?", "baaa"), "1:2");
  EXPECT_EQ(first("\\p{N}{2,3}", "1 23456"), "2:5");
  EXPECT_EQ(first("\\p{N}{2}", "1 2345"), "2:4");
  // Greedy backtracks to let the rest match.
  EXPECT_EQ(first("a*ab", "aaab"), "0:4");
  // A group repeated, and a capture group read as a plain group.
  EXPECT_EQ(first("(ab)+", "xababa"), "1:5");
  EXPECT_EQ(first("(?:ab)+?", "xababa"), "1:3");
}

TEST(SplitRegex, LookaheadAndEnd) {
  EXPECT_EQ(first("a(?=b)", "ac ab"), "3:4");
  EXPECT_EQ(first("a(?!b)", "ab ac"), "3:4");
  EXPECT_EQ(first("\\s+(?!\\S)", "a  b"), "1:2");
  EXPECT_EQ(first("\\s+$", "a  b  "), "4:6");
  // The idiom of the cased-word patterns: a letter that is not a-z.
  EXPECT_EQ(first("((?=[\\p{L}])([^a-z]))+", "ab1CD\xC3\x89" "e"), "3:6");
}

TEST(SplitRegex, ClassesAndProperties) {
  EXPECT_EQ(first("[^\\s\\p{L}\\p{N}]+", "ab 1 !?\xE2\x80\x94x"), "5:8");  // "!?—"
  EXPECT_EQ(first("[\\p{P}\\$]+", "a$.b"), "1:3");
  EXPECT_EQ(first("\\p{M}", "e\xCC\x81"), "1:2");
  EXPECT_EQ(first("[\xE4\xB8\x80-\xE9\xBE\xA5]+", "ab\xE4\xB8\xAD\xE6\x96\x87" "c"), "2:4");  // [一-龥]
  // Non-ASCII whitespace matches \s and nothing literal (llama.cpp maps it to \v).
  EXPECT_EQ(first("\\s", "a\xE3\x80\x80"), "1:2");
  EXPECT_EQ(first("[\xE3\x80\x80-\xE3\x80\x82]", "\xE3\x80\x80\xE3\x80\x82"), "1:2");
  EXPECT_EQ(first("[-a]+", "x-a-"), "1:4");
  EXPECT_EQ(first("[\\-\\]\\\\]+", "x-]\\"), "1:4");
}

TEST(SplitRegex, RefusesWhatItDoesNotImplement) {
  for (const char* bad : {"(?<=a)b", "a++", "\\bx", "[a", "a)", "(a", "*a", "\\p{Greek}", "a{3,2}", "(?i:a)"}) {
    auto re = SplitRegex::compile(bad);
    ASSERT_FALSE(re.ok()) << bad;
    EXPECT_TRUE(re.status().IsInvalidArgument()) << bad;
    EXPECT_NE(re.status().message().find(bad), std::string::npos) << re.status().ToString();
  }
}

}  // namespace
}  // namespace layerstream

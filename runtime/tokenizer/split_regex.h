// The one regex matcher behind every pre-tokenizer (pretokenizer.cpp holds
// the patterns, as data). It implements the subset of ECMAScript regular
// expressions that llama.cpp's pre-tokenizer patterns use, with the same
// backtracking semantics as std::regex (leftmost alternative first, greedy
// quantifiers, atomic lookahead):
//   alternation |, groups ( ) (?: ), lookahead (?= ) (?! ), end anchor $,
//   quantifiers ? * + {n} {n,} {n,m} (a trailing ? makes them lazy),
//   classes [..] [^..] with ranges, escapes \s \S \d \D \w \W \r \n \t \f \v
//   and \<punctuation>, and the property classes \p{L} (also \p{Lu} \p{Ll}
//   \p{Lt} \p{Lm} \p{Lo}: llama.cpp matches all five as any letter), \p{N},
//   \p{P}, \p{S}, \p{M} and \p{Han}.
// It runs over code points (Unit), not bytes. As in llama.cpp, a non-ASCII
// whitespace code point matches only \s (its `cp` is U+000B), so literal
// ranges never see it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {

// One code point of the text as the matcher sees it.
struct Unit {
  uint32_t cp;     // the code point; U+000B for non-ASCII whitespace
  uint16_t flags;  // cp_flags() of the real code point
};

// Makes the units of a sequence of code points.
Unit make_unit(uint32_t cp);

class SplitRegex {
 public:
  // InvalidArgument naming the pattern and the position of what is not
  // supported (back-references, \b, possessive quantifiers, ...).
  static Result<SplitRegex> compile(std::string_view pattern);

  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;
  ~SplitRegex();

  // The first non-empty match starting at or after `from` inside
  // text[begin, end) (lookahead and $ see `end` as the end of the text):
  // true with [*match_begin, *match_end), or false.
  bool find(const Unit* text, size_t begin, size_t end, size_t from, size_t* match_begin,
            size_t* match_end) const;

  const std::string& pattern() const;

  struct Program;

 private:
  explicit SplitRegex(std::unique_ptr<Program> p);
  std::unique_ptr<Program> p_;
};

}  // namespace layerstream

// Code point classes for the pre-tokenizer regexes (\p{L}, \p{N}, \s).
//
// ASCII is exact. Beyond ASCII this is an approximation by ranges, not the
// full Unicode Character Database:
//   whitespace: exactly Unicode White_Space (U+0085, U+00A0, U+1680,
//               U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000);
//   number:     the decimal-digit blocks of common scripts, superscript and
//               subscript digits, vulgar fractions, Roman numerals, circled
//               and fullwidth digits;
//   other:      C1 controls, Latin-1 punctuation and symbols, × ÷, combining
//               diacritics (U+0300-036F and a few mark blocks), Hebrew and
//               Arabic punctuation and points, general punctuation,
//               currency, letterlike and math symbols, arrows, box drawing,
//               dingbats, CJK punctuation, variation selectors, fullwidth
//               ASCII punctuation, private use, specials, emoji and symbol
//               planes, tags;
//   letter:     every other code point (so CJK, Hangul, Cyrillic, Greek,
//               Indic scripts including their vowel signs, ...).
// Invalid bytes in the text are classed as `other` by the caller.
#pragma once

#include <cstdint>

namespace layerstream {

enum class CpClass : uint8_t { kLetter, kNumber, kWhitespace, kOther };

CpClass classify_code_point(uint32_t cp);

}  // namespace layerstream

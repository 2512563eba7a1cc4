// Code point properties for the pre-tokenizer regexes: the major Unicode
// general category (\p{L}, \p{N}, \p{P}, \p{S}, \p{M}), White_Space (\s) and
// Han (\p{Han}). Categories come from a table generated from the Unicode
// Character Database (gen_unicode_table.py, Unicode 15.1, as llama.cpp's).
#pragma once

#include <cstdint>

namespace layerstream {

enum class UCat : uint8_t {
  kUnassigned,  // Cn
  kLetter,      // L*
  kNumber,      // N*
  kPunctuation, // P*
  kSymbol,      // S*
  kMark,        // M*
  kSeparator,   // Z*
  kControl,     // Cc, Cf, Co, Cs
};

// Bit set of the properties one code point has (see cp_flags()).
enum CpFlag : uint16_t {
  kCpLetter = 1u << 0,
  kCpNumber = 1u << 1,
  kCpPunctuation = 1u << 2,
  kCpSymbol = 1u << 3,
  kCpMark = 1u << 4,
  kCpWhitespace = 1u << 5,  // Unicode White_Space
  kCpHan = 1u << 6,         // CJK ideographs (unified, extensions A-F, compatibility)
};

UCat unicode_category(uint32_t cp);

// The category's flag (none for separators, controls, unassigned) plus
// kCpWhitespace and kCpHan. Code points above U+10FFFF have none.
uint16_t cp_flags(uint32_t cp);

}  // namespace layerstream

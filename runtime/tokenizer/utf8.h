// UTF-8 helpers for the tokenizers. Strict decoding per RFC 3629 / Unicode
// 15 Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace layerstream::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

enum class Scan {
  kValid,       // a whole well-formed sequence starts at pos (length in `len`)
  kIncomplete,  // the bytes from pos to the end are a proper prefix of a well-formed sequence
  kInvalid,     // the byte at pos cannot start a well-formed sequence here (len = 1)
};

struct ScanResult {
  Scan kind;
  size_t len;      // bytes consumed: sequence length (kValid), bytes left (kIncomplete), 1 (kInvalid)
  uint32_t cp;     // the code point (kValid only)
};

// Examines the sequence starting at s[pos]. REQUIRES: pos < s.size().
ScanResult scan(std::string_view s, size_t pos);

// True when all of s is well-formed UTF-8.
bool is_valid(std::string_view s);

// Appends the UTF-8 encoding of cp. REQUIRES: cp <= 0x10FFFF and not a surrogate.
void append(std::string& out, uint32_t cp);
// The same encoding for any cp < 0x110000, surrogates included (3 bytes):
// for text that must keep such code points as it found them.
void append_any(std::string& out, uint32_t cp);

}  // namespace layerstream::utf8

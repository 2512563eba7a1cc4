#include "runtime/tokenizer/utf8.h"

#include "layerstream/status.h"
#include "runtime/core/status_macros.h"

namespace layerstream::utf8 {

ScanResult scan(std::string_view s, size_t pos) {
  LS_CHECK(pos < s.size());
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[pos + i]); };
  const uint8_t c0 = b(0);
  if (c0 < 0x80) return {Scan::kValid, 1, c0};
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  uint32_t cp;
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    need = 2; cp = c0 & 0x1F;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    need = 3; cp = c0 & 0x0F;
    if (c0 == 0xE0) lo = 0xA0;  // no overlong
    if (c0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    need = 4; cp = c0 & 0x07;
    if (c0 == 0xF0) lo = 0x90;  // no overlong
    if (c0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return {Scan::kInvalid, 1, 0};
  }
  const size_t avail = s.size() - pos;
  for (size_t i = 1; i < need; ++i) {
    if (i >= avail) return {Scan::kIncomplete, avail, 0};
    const uint8_t ci = b(i);
    const uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (ci < l || ci > h) return {Scan::kInvalid, 1, 0};
    cp = (cp << 6) | (ci & 0x3F);
  }
  return {Scan::kValid, need, cp};
}

bool is_valid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    ScanResult r = scan(s, pos);
    if (r.kind != Scan::kValid) return false;
    pos += r.len;
  }
  return true;
}

void append(std::string& out, uint32_t cp) {
  LS_CHECK(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF));
  append_any(out, cp);
}

void append_any(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace layerstream::utf8

#include "runtime/tokenizer/unicode_class.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace layerstream {
namespace {

struct CatRun {
  uint32_t first;
  UCat cat;
};

constexpr CatRun kCategories[] = {
#include "runtime/tokenizer/unicode_table.inc"
};

// Unicode White_Space (PropList.txt).
constexpr uint32_t kWhitespace[] = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
                                    0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007,
                                    0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};

struct Range {
  uint32_t lo, hi;
};
// The CJK ideograph blocks (Kimi K2's \p{Han}).
constexpr Range kHan[] = {{0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xF900, 0xFAFF},   {0x20000, 0x2A6DF},
                          {0x2A700, 0x2B73F}, {0x2B740, 0x2B81F}, {0x2B820, 0x2CEAF}, {0x2CEB0, 0x2EBEF},
                          {0x2F800, 0x2FA1F}};

uint16_t category_flag(UCat c) {
  switch (c) {
    case UCat::kLetter: return kCpLetter;
    case UCat::kNumber: return kCpNumber;
    case UCat::kPunctuation: return kCpPunctuation;
    case UCat::kSymbol: return kCpSymbol;
    case UCat::kMark: return kCpMark;
    default: return 0;
  }
}

uint16_t compute_flags(uint32_t cp) {
  uint16_t f = category_flag(unicode_category(cp));
  if (std::find(std::begin(kWhitespace), std::end(kWhitespace), cp) != std::end(kWhitespace)) f |= kCpWhitespace;
  for (const Range& r : kHan) {
    if (cp >= r.lo && cp <= r.hi) f |= kCpHan;
  }
  return f;
}

// The first 64K code points (nearly all text) answered from an array.
const std::array<uint16_t, 0x10000>& bmp_flags() {
  static const std::array<uint16_t, 0x10000> table = [] {
    std::array<uint16_t, 0x10000> t{};
    for (uint32_t cp = 0; cp < 0x10000; ++cp) t[cp] = compute_flags(cp);
    return t;
  }();
  return table;
}

}  // namespace

UCat unicode_category(uint32_t cp) {
  if (cp > 0x10FFFF) return UCat::kUnassigned;
  auto it = std::upper_bound(std::begin(kCategories), std::end(kCategories), cp,
                             [](uint32_t v, const CatRun& r) { return v < r.first; });
  return std::prev(it)->cat;
}

uint16_t cp_flags(uint32_t cp) {
  if (cp < 0x10000) return bmp_flags()[cp];
  if (cp > 0x10FFFF) return 0;
  return compute_flags(cp);
}

}  // namespace layerstream

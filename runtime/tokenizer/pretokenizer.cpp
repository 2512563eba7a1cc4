#include "runtime/tokenizer/pretokenizer.h"

#include <cstdint>
#include <string>

#include "runtime/tokenizer/unicode_class.h"
#include "runtime/tokenizer/utf8.h"

namespace layerstream {
namespace {

// The text as code points: cp[i] starts at byte off[i]; off has one extra
// entry (text size). Invalid bytes become one "other" unit each.
struct Units {
  std::vector<uint32_t> cp;
  std::vector<CpClass> cls;
  std::vector<size_t> off;
};

constexpr uint32_t kInvalidUnit = 0xFFFFFFFF;

Units decode_units(std::string_view text) {
  Units u;
  for (size_t pos = 0; pos < text.size();) {
    utf8::ScanResult r = utf8::scan(text, pos);
    u.off.push_back(pos);
    if (r.kind == utf8::Scan::kValid) {
      u.cp.push_back(r.cp);
      u.cls.push_back(classify_code_point(r.cp));
      pos += r.len;
    } else {
      u.cp.push_back(kInvalidUnit);
      u.cls.push_back(CpClass::kOther);
      pos += 1;
    }
  }
  u.off.push_back(text.size());
  return u;
}

// A half-open range of unit indices.
struct Span {
  size_t begin, end;
};

class Splitter {
 public:
  explicit Splitter(const Units& u) : u_(u) {}

  bool letter(size_t i) const { return u_.cls[i] == CpClass::kLetter; }
  bool number(size_t i) const { return u_.cls[i] == CpClass::kNumber; }
  bool space(size_t i) const { return u_.cls[i] == CpClass::kWhitespace; }
  bool other(size_t i) const { return u_.cls[i] == CpClass::kOther; }
  uint32_t lower(size_t i) const {
    uint32_t c = u_.cp[i];
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  }

  // Length (in units) of a contraction 's 't 're 've 'm 'll 'd at i within
  // [i, end), 0 if none.
  size_t contraction(size_t i, size_t end, bool ignore_case) const {
    if (u_.cp[i] != '\'' || i + 1 >= end) return 0;
    auto at = [&](size_t k) { return ignore_case ? lower(k) : u_.cp[k]; };
    uint32_t a = at(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 < end) {
      uint32_t b = at(i + 2);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    return 0;
  }

  // Whitespace alternatives shared by both regex families:
  // \s+(?!\S) then (optionally) \s+. Returns the match length (0: none).
  size_t trailing_space(size_t i, size_t end, bool plain_fallback) const {
    size_t n = 0;
    while (i + n < end && space(i + n)) ++n;
    if (n == 0) return 0;
    if (i + n == end) return n;  // nothing follows: the whole run
    if (n > 1) return n - 1;     // leave the last space to prefix the next word
    return plain_fallback ? n : 0;
  }

  // GPT-2 regex on [s.begin, s.end); appends matches (and unmatched runs) to out.
  void gpt2(Span s, bool final_plain_space, std::vector<Span>& out) const {
    size_t unmatched = s.begin;
    size_t i = s.begin;
    while (i < s.end) {
      size_t n = gpt2_match(i, s.end, final_plain_space);
      if (n == 0) {
        ++i;
        continue;
      }
      if (unmatched < i) out.push_back({unmatched, i});
      out.push_back({i, i + n});
      i += n;
      unmatched = i;
    }
    if (unmatched < s.end) out.push_back({unmatched, s.end});
  }

  size_t gpt2_match(size_t i, size_t end, bool final_plain_space) const {
    if (size_t n = contraction(i, end, /*ignore_case=*/false)) return n;
    const size_t j = (u_.cp[i] == ' ' && i + 1 < end) ? i + 1 : i;  // the optional leading ' '
    auto run = [&](size_t k, auto pred) {
      while (k < end && pred(k)) ++k;
      return k;
    };
    if (letter(j)) return run(j, [&](size_t k) { return letter(k); }) - i;
    if (number(j)) return run(j, [&](size_t k) { return number(k); }) - i;
    if (other(j)) return run(j, [&](size_t k) { return other(k); }) - i;
    return trailing_space(i, end, final_plain_space);
  }

  // llama3 regex on [s.begin, s.end); every position matches some alternative.
  void llama3(Span s, std::vector<Span>& out) const {
    for (size_t i = s.begin; i < s.end;) {
      size_t n = llama3_match(i, s.end);
      out.push_back({i, i + n});
      i += n;
    }
  }

  size_t llama3_match(size_t i, size_t end) const {
    auto is_crlf = [&](size_t k) { return u_.cp[k] == '\r' || u_.cp[k] == '\n'; };
    auto run = [&](size_t k, auto pred) {
      while (k < end && pred(k)) ++k;
      return k;
    };
    if (size_t n = contraction(i, end, /*ignore_case=*/true)) return n;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (letter(i)) return run(i, [&](size_t k) { return letter(k); }) - i;
    if (!is_crlf(i) && !number(i) && i + 1 < end && letter(i + 1))
      return run(i + 1, [&](size_t k) { return letter(k); }) - i;
    // \p{N}{1,3}
    if (number(i)) {
      size_t k = i;
      while (k < end && k < i + 3 && number(k)) ++k;
      return k - i;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const size_t j = (u_.cp[i] == ' ' && i + 1 < end) ? i + 1 : i;
    if (other(j)) {
      size_t k = run(j, [&](size_t q) { return other(q); });
      return run(k, is_crlf) - i;
    }
    // \s*[\r\n]+ : up to the last CR/LF of the whitespace run
    size_t n = 0, last_crlf = 0;
    while (i + n < end && space(i + n)) {
      if (is_crlf(i + n)) last_crlf = n + 1;
      ++n;
    }
    if (last_crlf > 0) return last_crlf;
    // \s+(?!\S) | \s+
    return trailing_space(i, end, /*plain_fallback=*/true);
  }

  // \p{N}: every number its own piece, the runs between kept whole.
  void single_digits(Span s, std::vector<Span>& out) const {
    size_t start = s.begin;
    for (size_t i = s.begin; i < s.end; ++i) {
      if (!number(i)) continue;
      if (start < i) out.push_back({start, i});
      out.push_back({i, i + 1});
      start = i + 1;
    }
    if (start < s.end) out.push_back({start, s.end});
  }

 private:
  const Units& u_;
};

}  // namespace

Result<PreTokenizer> parse_pre_tokenizer(std::string_view name) {
  if (name.empty() || name == "default" || name == "gpt2") return PreTokenizer::kGpt2;
  if (name == "llama3" || name == "llama-bpe") return PreTokenizer::kLlama3;
  if (name == "smollm") return PreTokenizer::kSmollm;
  return Status::Unsupported("tokenizer pre-tokenizer '" + std::string(name) +
                             "' is not supported (supported: default, gpt2, llama3, smollm)");
}

std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text) {
  if (text.empty()) return {};
  const Units u = decode_units(text);
  const Splitter sp(u);
  const Span all{0, u.cp.size()};
  std::vector<Span> spans;
  switch (kind) {
    case PreTokenizer::kGpt2:
      sp.gpt2(all, /*final_plain_space=*/true, spans);
      break;
    case PreTokenizer::kLlama3:
      sp.llama3(all, spans);
      break;
    case PreTokenizer::kSmollm: {
      std::vector<Span> digits;
      sp.single_digits(all, digits);
      for (const Span& s : digits) sp.gpt2(s, /*final_plain_space=*/false, spans);
      break;
    }
  }
  std::vector<std::string_view> words;
  words.reserve(spans.size());
  for (const Span& s : spans) words.push_back(text.substr(u.off[s.begin], u.off[s.end] - u.off[s.begin]));
  return words;
}

}  // namespace layerstream

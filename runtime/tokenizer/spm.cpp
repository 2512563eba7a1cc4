// SentencePiece BPE encoding, after llama.cpp's llm_tokenizer_spm: the text
// is split into characters (by the length each lead byte announces, as
// llama.cpp does, so bytes that are not UTF-8 may join the next ones), then
// the adjacent pair whose concatenation is a vocabulary piece with the
// highest score is merged, repeatedly (ties: the leftmost pair). Characters
// left that are not pieces fall back to byte tokens <0xXX> (or <unk> when
// the vocabulary has none).
#include <algorithm>
#include <queue>

#include "runtime/tokenizer/tokenizer_impl.h"

namespace layerstream {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

struct Symbol {
  int prev, next;
  size_t off, len;  // bytes in the escaped buffer; len 0 once merged away
  bool literal;     // a "▁" that was in the input: never merged, always bytes
};

struct Bigram {
  float score;
  int left, right;
  size_t size;  // len(left) + len(right) when queued; stale if it changed
};

struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

namespace {

// The text with spaces escaped to "▁" (and one in front with prefix_space);
// `literal_at`: where a "▁" of the input itself starts (never merged).
std::string escape_spaces(std::string_view text, bool prefix_space, std::vector<size_t>& literal_at) {
  std::string buf;
  buf.reserve(text.size() * 3 / 2 + 3);
  if (prefix_space) buf.append(kSpace);
  for (size_t pos = 0; pos < text.size();) {
    if (text[pos] == ' ') {
      buf.append(kSpace);
      ++pos;
    } else if (text.compare(pos, kSpace.size(), kSpace) == 0) {
      literal_at.push_back(buf.size());
      buf.append(kSpace);
      pos += kSpace.size();
    } else {
      buf.push_back(text[pos++]);
    }
  }
  return buf;
}

// Characters as llama.cpp cuts them: the length a lead byte announces
// (a stray continuation byte alone), so bytes that are not UTF-8 may join
// the bytes after them into one symbol, which then falls back to bytes.
std::vector<Symbol> cut_symbols(const std::string& buf, const std::vector<size_t>& literal_at) {
  std::vector<Symbol> syms;
  size_t next_literal = 0;
  for (size_t pos = 0; pos < buf.size();) {
    const auto lead = static_cast<uint8_t>(buf[pos]);
    const size_t want = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const size_t n = std::min(want, buf.size() - pos);
    while (next_literal < literal_at.size() && literal_at[next_literal] < pos) ++next_literal;  // swallowed
    const bool literal = next_literal < literal_at.size() && literal_at[next_literal] == pos;
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, idx + 1, pos, n, literal});
    pos += n;
  }
  return syms;
}

}  // namespace

void Tokenizer::Impl::encode_spm(std::string_view text, bool prefix_space, std::vector<int32_t>& out) const {
  std::vector<size_t> literal_at;
  const std::string buf = escape_spaces(text, prefix_space, literal_at);
  std::vector<Symbol> syms = cut_symbols(buf, literal_at);
  if (syms.empty()) return;
  syms.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  auto try_bigram = [&](int left, int right) {
    if (left < 0 || right < 0 || syms[left].literal || syms[right].literal) return;
    const std::string_view s(buf.data() + syms[left].off, syms[left].len + syms[right].len);
    auto it = piece_to_id.find(s);
    if (it == piece_to_id.end()) return;
    const float score = v.scores.empty() ? 0.0f : v.scores[it->second];
    queue.push({score, left, right, s.size()});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_bigram(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = syms[b.left];
    Symbol& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_bigram(l.prev, b.left);
    try_bigram(b.left, l.next);
  }

  // Byte fallback; a piece with any byte lacking a token becomes one <unk>
  // (create() guarantees <unk> exists when byte tokens are missing).
  auto emit_bytes = [&](std::string_view bytes) {
    for (unsigned char c : bytes) {
      if (byte_to_id[c] < 0) {
        if (v.unk_id) out.push_back(*v.unk_id);
        return;
      }
    }
    for (unsigned char c : bytes) out.push_back(byte_to_id[c]);
  };
  for (int i = 0; i >= 0; i = syms[i].next) {
    const Symbol& s = syms[i];
    const std::string_view piece(buf.data() + s.off, s.len);
    if (!s.literal) {
      auto it = piece_to_id.find(piece);
      if (it != piece_to_id.end()) {
        out.push_back(it->second);
        continue;
      }
      if (piece == kSpace) {  // a space, and the vocabulary lacks "▁"
        emit_bytes(" ");
        continue;
      }
    }
    emit_bytes(piece);
  }
}

}  // namespace layerstream

// SentencePiece BPE encoding, after llama.cpp's llm_tokenizer_spm: the text
// is split into characters, then the adjacent pair whose concatenation is a
// vocabulary piece with the highest score is merged, repeatedly (ties: the
// leftmost pair). Characters left that are not pieces fall back to byte
// tokens <0xXX> (or <unk> when the vocabulary has none).
#include <queue>

#include "runtime/tokenizer/tokenizer_impl.h"
#include "runtime/tokenizer/utf8.h"

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

void Tokenizer::Impl::encode_spm(std::string_view text, bool prefix_space, std::vector<int32_t>& out) const {
  std::string buf;
  buf.reserve(text.size() * 3 / 2 + 3);
  std::vector<Symbol> syms;
  auto add = [&](std::string_view bytes, bool literal) {
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, idx + 1, buf.size(), bytes.size(), literal});
    buf.append(bytes);
  };
  if (prefix_space) add(kSpace, false);
  for (size_t pos = 0; pos < text.size();) {
    utf8::ScanResult r = utf8::scan(text, pos);
    const size_t n = r.kind == utf8::Scan::kValid ? r.len : 1;
    const std::string_view ch = text.substr(pos, n);
    if (ch == " ") {
      add(kSpace, false);
    } else {
      add(ch, ch == kSpace);
    }
    pos += n;
  }
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

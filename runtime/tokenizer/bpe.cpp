// Byte-level BPE encoding, after llama.cpp's llm_tokenizer_bpe: the text is
// split into words by the pre-tokenizer (bytes that are not UTF-8 become
// U+FFFD there, as in llama.cpp), each byte of a word is replaced by
// its GPT-2 printable character, then the adjacent pair with the lowest merge
// rank is merged, repeatedly (ties: the leftmost pair). Each final symbol is
// looked up in the vocabulary; one that is not there falls back to its
// single-byte tokens (or <unk>).
#include <queue>

#include "runtime/tokenizer/tokenizer_impl.h"
#include "runtime/tokenizer/utf8.h"

namespace layerstream {
namespace {

struct Symbol {
  int prev, next;
  std::string text;  // mapped (GPT-2 characters); empty once merged away
  size_t off, len;   // original bytes within the word
};

struct Bigram {
  int32_t rank;
  int left, right;
  size_t size;  // text size of left + right when queued; stale if it changed
};

struct BigramGreater {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

const std::array<std::string, 256>& mapped_bytes() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int b = 0; b < 256; ++b) utf8::append(t[b], gpt2_byte_to_code_point()[b]);
    return t;
  }();
  return table;
}

}  // namespace

const std::array<uint32_t, 256>& gpt2_byte_to_code_point() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

void Tokenizer::Impl::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  const auto& mapped = mapped_bytes();
  std::string key, scratch;
  std::vector<std::string_view> words;
  pre_tokenize(*pre, text, scratch, words);
  for (std::string_view word : words) {
    if (pre->ignore_merges) {
      std::string whole;
      for (unsigned char c : word) whole += mapped[c];
      auto it = piece_to_id.find(whole);
      if (it != piece_to_id.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    std::vector<Symbol> syms(word.size());
    for (size_t i = 0; i < word.size(); ++i) {
      const int idx = static_cast<int>(i);
      syms[i] = {idx - 1, idx + 1, mapped[static_cast<unsigned char>(word[i])], i, 1};
    }
    syms.back().next = -1;

    std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue;
    auto try_bigram = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      key.assign(syms[left].text).append(" ").append(syms[right].text);
      auto it = merge_rank.find(key);
      if (it == merge_rank.end()) return;
      queue.push({it->second, left, right, syms[left].text.size() + syms[right].text.size()});
    };
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_bigram(i - 1, i);

    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Symbol& l = syms[b.left];
      Symbol& r = syms[b.right];
      if (l.text.empty() || r.text.empty() || l.next != b.right || l.text.size() + r.text.size() != b.size) continue;
      l.text += r.text;
      l.len += r.len;
      r.text.clear();
      l.next = r.next;
      if (r.next >= 0) syms[r.next].prev = b.left;
      try_bigram(l.prev, b.left);
      try_bigram(b.left, l.next);
    }

    for (int i = 0; i >= 0; i = syms[i].next) {
      const Symbol& s = syms[i];
      auto it = piece_to_id.find(s.text);
      if (it != piece_to_id.end()) {
        out.push_back(it->second);
        continue;
      }
      for (size_t k = s.off; k < s.off + s.len; ++k) {
        const int32_t id = byte_to_id[static_cast<unsigned char>(word[k])];
        if (id >= 0) {
          out.push_back(id);
        } else if (v.unk_id) {
          out.push_back(*v.unk_id);
        }
      }
    }
  }
}

}  // namespace layerstream

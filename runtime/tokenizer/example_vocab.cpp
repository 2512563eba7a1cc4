#include "runtime/tokenizer/example_vocab.h"

#include <cstdio>
#include <string>
#include <unordered_set>

#include "runtime/core/status_macros.h"

namespace layerstream {
namespace {

constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581 "▁"

// Frequent English words; each enters the vocabulary with all its prefixes so
// that SentencePiece merging can build it one character at a time.
constexpr const char* kWords[] = {
    "the", "of", "and", "to", "in", "is", "that", "it", "was", "for", "on", "are", "as", "with",
    "he", "she", "they", "we", "you", "at", "be", "this", "have", "from", "or", "one", "had",
    "by", "word", "but", "not", "what", "all", "were", "when", "your", "can", "said", "there",
    "use", "an", "each", "which", "do", "how", "their", "if", "will", "up", "other", "about",
    "out", "many", "then", "them", "these", "so", "some", "her", "would", "make", "like", "him",
    "into", "time", "has", "look", "two", "more", "write", "go", "see", "number", "no", "way",
    "could", "people", "my", "than", "first", "water", "been", "call", "who", "its", "now",
    "find", "long", "down", "day", "did", "get", "come", "made", "may", "part", "over", "new",
    "layer", "model", "stream", "memory", "token", "text", "hello", "world", "once", "upon",
    "little", "story", "there", "very", "happy", "sun", "tree", "friend", "play", "big",
};
constexpr const char* kSuffixes[] = {"ing", "ed", "er", "es", "ly", "tion", "ment", "ness", "est", "s"};

class Builder {
 public:
  Builder(TokenizerVocab* v, uint32_t limit) : v_(v), limit_(limit) {}
  bool full() const { return v_->tokens.size() >= limit_; }
  // Adds a normal piece (if new and room is left) with the next lower score.
  void piece(const std::string& text) {
    if (full() || !seen_.insert(text).second) return;
    v_->tokens.push_back(text);
    v_->scores.push_back(next_score_);
    v_->token_types.push_back(static_cast<int32_t>(TokenType::kNormal));
    next_score_ -= 1.0f;
  }
  // Adds every prefix of `text` (cut at UTF-8 character boundaries), shortest first.
  void with_prefixes(const std::string& text) {
    for (size_t n = 1; n <= text.size(); ++n) {
      if (n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) continue;
      piece(text.substr(0, n));
    }
  }
  void special(const std::string& text, TokenType type) {
    seen_.insert(text);
    v_->tokens.push_back(text);
    v_->scores.push_back(0.0f);
    v_->token_types.push_back(static_cast<int32_t>(type));
  }

 private:
  TokenizerVocab* v_;
  uint32_t limit_;
  float next_score_ = -1.0f;
  std::unordered_set<std::string> seen_;
};

}  // namespace

Result<TokenizerVocab> try_make_example_vocab(uint32_t vocab_size) {
  if (vocab_size < kMinExampleVocabSize) {
    return Status::InvalidArgument("example vocabulary size " + std::to_string(vocab_size) +
                                   " is below the minimum " + std::to_string(kMinExampleVocabSize));
  }
  TokenizerVocab v;
  v.model = "llama";
  v.pre = "default";
  v.tokens.reserve(vocab_size);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  v.add_eos = false;
  v.add_space_prefix = true;

  Builder b(&v, vocab_size);
  b.special("<unk>", TokenType::kUnknown);
  b.special("<s>", TokenType::kControl);
  b.special("</s>", TokenType::kControl);
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    b.special(name, TokenType::kByte);
  }

  const std::string sp = kSpace;
  b.piece(sp);
  for (char c = 'a'; c <= 'z'; ++c) b.piece(std::string(1, c));
  for (char c = 'A'; c <= 'Z'; ++c) b.piece(std::string(1, c));
  for (char c = '0'; c <= '9'; ++c) b.piece(std::string(1, c));
  for (char c : std::string(".,!?'\"-:;()[]{}/\\@#$%&*+=<>_~`^|")) b.piece(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) b.piece(sp + c);
  for (char c = 'A'; c <= 'Z'; ++c) b.piece(sp + c);
  for (const char* w : kWords) b.with_prefixes(sp + w);
  for (const char* w : kWords) {
    std::string cap = w;
    cap[0] = static_cast<char>(cap[0] - 'a' + 'A');
    b.with_prefixes(sp + cap);
  }
  for (const char* s : kSuffixes) b.with_prefixes(s);
  b.piece(sp + sp);
  b.piece(sp + sp + sp + sp);
  for (char c : std::string(".,!?'\"-:;()")) b.piece(sp + c);

  // Fill: letter pairs and triples, with and without the word-start marker;
  // each one's prefixes are already present when it is added.
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  for (char x : letters)
    for (char y : letters) b.piece(sp + x + y);
  for (char x : letters)
    for (char y : letters) b.piece(std::string{x, y});
  for (char x : letters)
    for (char y : letters)
      for (char z : letters) b.piece(sp + x + y + z);
  for (char x : letters)
    for (char y : letters)
      for (char z : letters) b.piece(std::string{x, y, z});
  for (char x : letters)
    for (char y : letters)
      for (char z : letters)
        for (char w : letters) {
          if (b.full()) break;
          b.piece(std::string{x, y, z, w});
        }
  for (uint32_t i = 0; !b.full(); ++i) b.special("<unused_" + std::to_string(i) + ">", TokenType::kUnused);
  return v;
}

TokenizerVocab make_example_vocab(uint32_t vocab_size) {
  Result<TokenizerVocab> v = try_make_example_vocab(vocab_size);
  LS_CHECK_MSG(v.ok(), v.status().ToString());
  return std::move(v).value();
}

}  // namespace layerstream

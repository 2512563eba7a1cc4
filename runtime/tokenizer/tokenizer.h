// Tokenizer: text <-> token ids for the two GGUF tokenizer models,
//   "llama": SentencePiece BPE with byte fallback (llama.cpp llm_tokenizer_spm),
//   "gpt2":  byte-level BPE with ranked merges and a named pre-tokenizer
//            (llama.cpp llm_tokenizer_bpe; every pre-tokenizer of llama.cpp's
//            regex families, see pretokenizer.h).
//
// Thread safety: immutable after create(); all const methods may be called
// from any number of threads at once.
//
// Deviations from llama.cpp, on purpose:
//  - plain text is merged only into normal / user-defined pieces; control,
//    byte, unknown and unused tokens never result from merging;
//  - llama: a literal U+2581 "▁" in the input is encoded with byte tokens
//    (not as a space), so that decode(encode(t)) == t holds for every t;
//  - gpt2: a byte the vocabulary has no token for (nor <unk>) is dropped,
//    where llama.cpp throws.
// As llama.cpp, gpt2 encodes a byte that is not UTF-8 as U+FFFD, so
// decode(encode(t)) == t holds there for valid UTF-8 only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "layerstream/status.h"
#include "runtime/tokenizer/vocab.h"

namespace layerstream {

class Tokenizer {
 public:
  // Validates and indexes the vocabulary. Errors:
  //   Unsupported: model not "llama"/"gpt2" (named); unknown gpt2 pre-tokenizer
  //     (named, with the supported names); no <unk> and a byte without its
  //     token (llama: any of the 256; gpt2: printable ASCII).
  //   Corruption: empty token list; scores/token_types size != tokens size;
  //     a special id outside [0, vocab_size); a token type outside 0..6; a
  //     merge that is not "left right".
  static Result<std::unique_ptr<Tokenizer>> create(TokenizerVocab vocab);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text (any bytes; need not be valid UTF-8) to token ids.
  // add_special: prepend BOS / append EOS as the vocabulary's add_bos/add_eos say.
  // parse_special: control and unknown tokens written in the text ("<s>",
  //   "<|im_start|>") become their ids, as llama.cpp's llama-tokenize does by
  //   default; otherwise they are tokenized as plain text. User-defined
  //   tokens are always split out. As llama.cpp, longer special tokens are
  //   cut out first, and a token with lstrip/rstrip (set by model name, as
  //   llama.cpp does: Phi-3, Jina v2, ModernBERT) takes the ASCII whitespace
  //   before/after it.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = false) const;

  // Token ids to bytes. Control and unused tokens render as nothing, <unk>
  // as " ⁇ ", ids outside the vocabulary as U+FFFD. llama: "▁" becomes a
  // space and the space that encode() prefixed is removed from the first
  // piece. Byte tokens may make the result invalid UTF-8 (exactly the bytes
  // that were encoded); use TokenStreamDecoder for display text.
  std::string decode(std::span<const int32_t> ids) const;

  // The bytes of one token as decode() renders it (no leading-space removal).
  std::string token_to_piece(int32_t id) const;

  // InvalidArgument naming the first id outside [0, vocab_size()).
  Status check_ids(std::span<const int32_t> ids) const;

  // End of generation: EOS, EOT, and tokens named like an end of turn
  // (<|eot_id|>, <|im_end|>, <|endoftext|>, <end_of_turn>, ...; the list of
  // llama.cpp's vocabulary loader; such a token is treated as control).
  bool is_eog(int32_t id) const;
  bool is_control(int32_t id) const;

  int32_t vocab_size() const;
  std::optional<int32_t> bos() const;
  std::optional<int32_t> eos() const;
  const TokenizerVocab& vocab() const;

  // True when decode() strips the space encode() prefixed (llama with
  // add_space_prefix); used by TokenStreamDecoder.
  bool strips_leading_space() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenizer for streaming output: push ids one at a time and
// get back only complete, well-formed UTF-8. Bytes of a multibyte character
// split across tokens are held back until the character is complete; bytes
// that can never form a valid character become U+FFFD (one per byte).
// finish() flushes what is held (an incomplete tail becomes U+FFFD per byte).
// The concatenated output equals decode(ids) whenever that is valid UTF-8.
// Not thread-safe; the tokenizer must outlive it.
class TokenStreamDecoder {
 public:
  explicit TokenStreamDecoder(const Tokenizer& tokenizer);
  std::string push(int32_t id);
  std::string finish();
  // Forgets held bytes and starts a new text (the next piece is a first piece).
  void reset();

 private:
  std::string drain(bool final);

  const Tokenizer& tok_;
  std::string pending_;
  bool at_start_ = true;
};

}  // namespace layerstream

// Internal state of Tokenizer shared by tokenizer.cpp, spm.cpp and bpe.cpp.
// Immutable after Tokenizer::create().
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/pretokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream {

// Hash that lets unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct Tokenizer::Impl {
  enum class Model { kSpm, kBpe };

  TokenizerVocab v;
  Model model = Model::kSpm;
  const PreTokenizer* pre = nullptr;   // bpe: the pre-tokenizer (ignore_merges: a word that is a token is emitted whole)
  std::vector<TokenType> types;        // per id
  StringMap<int32_t> piece_to_id;      // pieces plain text may become: normal, undefined, user-defined
  std::array<int32_t, 256> byte_to_id; // byte fallback (-1: none); spm <0xXX>, bpe the mapped character
  StringMap<int32_t> merge_rank;       // bpe: "left right" -> rank (lower merges first)
  struct Special {
    std::string text;
    int32_t id;
    bool control;  // split out only with parse_special (control and unknown tokens)
    bool lstrip;   // whitespace before it is dropped
    bool rstrip;   // whitespace after it is dropped
  };
  std::vector<Special> specials;       // longest first (llama.cpp's order of splitting)
  // Indices into specials by their first byte, so that finding which
  // specials occur in a text costs a lookup per text byte, not a scan of all.
  std::array<std::vector<uint32_t>, 256> specials_by_byte;

  // A piece of the text to encode: plain text, or a special token.
  struct Fragment {
    int32_t id;           // the special token; -1: plain text
    size_t offset, size;  // plain text: its bytes
  };
  std::vector<Fragment> partition_specials(std::string_view text, bool parse_special) const;
  void set_strip_attributes(const TokenizerVocab& vocab);
  std::vector<std::string> rendered;   // per id: the bytes decode() writes
  std::vector<bool> eog;               // per id

  // Tokenizer::create's steps.
  Status choose_model(const TokenizerVocab& vocab);
  Status read_token_types(const TokenizerVocab& vocab);
  Status index_tokens(const TokenizerVocab& vocab);
  Status read_merges(const TokenizerVocab& vocab);
  void render_tokens(const TokenizerVocab& vocab);

  int32_t unk_or(int32_t fallback) const { return v.unk_id ? *v.unk_id : fallback; }

  // Appends the ids of a plain-text fragment (no special tokens inside).
  void encode_spm(std::string_view text, bool prefix_space, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
};

// GPT-2 bytes_to_unicode(): the printable code point standing for each byte.
const std::array<uint32_t, 256>& gpt2_byte_to_code_point();

}  // namespace layerstream

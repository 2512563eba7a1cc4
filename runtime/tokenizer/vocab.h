// TokenizerVocab: the tokenizer description as GGUF stores it
// (tokenizer.ggml.* keys), filled by the model loader or built by hand in
// tests. A plain value; Tokenizer::create() validates it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace layerstream {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <s>, </s>, <|eot_id|>: never produced from plain text
  kUserDefined = 4,  // always split out of the text verbatim
  kUnused = 5,
  kByte = 6,         // <0xXX>: SentencePiece byte fallback
};

struct TokenizerVocab {
  std::string model;                // tokenizer.ggml.model: "llama" (SentencePiece BPE) or "gpt2" (byte-level BPE)
  std::string pre;                  // tokenizer.ggml.pre: "llama-bpe", "qwen2", ... ("" = "default"); gpt2 only
  std::string model_name;           // general.name: llama.cpp gives some models' special tokens lstrip/rstrip by it
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens, index = token id
  std::vector<float> scores;        // tokenizer.ggml.scores: same size as tokens, or empty (all 0)
  std::vector<int32_t> token_types; // tokenizer.ggml.token_type: same size as tokens, or empty (all normal)
  std::vector<std::string> merges;  // tokenizer.ggml.merges (gpt2): "left right", rank = index
  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  std::optional<int32_t> eot_id;    // tokenizer.ggml.eot_token_id: another end-of-generation token
  bool add_bos = true, add_eos = false;  // tokenizer.ggml.add_bos_token / add_eos_token
  bool add_space_prefix = true;     // tokenizer.ggml.add_space_prefix (llama): prepend "▁" to the text
};

}  // namespace layerstream

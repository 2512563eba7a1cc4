// Pre-tokenizers of byte-level BPE vocabularies (tokenizer.ggml.pre): split
// text into words before BPE merging, as llama.cpp's regexes do. Written by
// hand (no \p{..} regex engine); code point classes from unicode_class.h.
#pragma once

#include <string_view>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {

enum class PreTokenizer {
  // "default", "gpt2", "": the GPT-2 regex
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  // (llama.cpp's own fallback for an unrecognised "default" differs; we use GPT-2's.)
  kGpt2,
  // "llama3": (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  // (and a word that is itself a token skips merging: ignore_merges).
  kLlama3,
  // "smollm": first \p{N} (every digit its own piece), then on each piece
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  kSmollm,
};

// Maps a tokenizer.ggml.pre value; Unsupported naming it when unknown.
Result<PreTokenizer> parse_pre_tokenizer(std::string_view name);

// Splits text into words. The words are views into `text`, in order, and
// concatenate to exactly `text` (bytes that are not valid UTF-8 are kept,
// each classed as punctuation-like "other").
std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace layerstream

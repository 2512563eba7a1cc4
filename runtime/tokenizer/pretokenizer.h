// Pre-tokenizers of byte-level BPE vocabularies (tokenizer.ggml.pre): split
// the text into words before BPE merging, as llama.cpp does. Every
// pre-tokenizer is data: its names (tokenizer.ggml.pre values, aliases
// included), an ordered list of split patterns and whether a word that is
// itself a token skips merging (ignore_merges). One matcher (split_regex.h)
// runs them all: each pattern splits every piece the previous one left into
// its matches and the text between them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "layerstream/status.h"
#include "runtime/tokenizer/split_regex.h"

namespace layerstream {

struct PreTokenizer {
  std::string name;                  // the canonical name (first of the family's names)
  std::vector<SplitRegex> patterns;  // applied in order
  bool ignore_merges = false;        // a word that is a token is emitted whole
};

// The pre-tokenizer a tokenizer.ggml.pre value names ("" is "default", as in
// llama.cpp); Unsupported naming the value and listing the supported names
// when unknown. The result lives as long as the program.
Result<const PreTokenizer*> find_pre_tokenizer(std::string_view name);

// Whether llama.cpp adds BOS for a byte-level BPE vocabulary with this
// tokenizer.ggml.pre value when the file has no add_bos_token key (true for
// the Llama 3 family and Tekken).
bool bpe_adds_bos_by_default(std::string_view name);

// Every supported tokenizer.ggml.pre value, sorted.
std::vector<std::string> supported_pre_tokenizer_names();

// Splits text into words (views into `text`, or into `scratch` when the text
// is not valid UTF-8). As llama.cpp does, each byte that does not start a
// well-formed sequence stands for U+FFFD, so then the words concatenate to
// the text with those bytes replaced by EF BF BD; otherwise to exactly `text`.
void pre_tokenize(const PreTokenizer& pre, std::string_view text, std::string& scratch,
                  std::vector<std::string_view>& words);

}  // namespace layerstream

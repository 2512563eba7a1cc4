// Helpers for the tokenizer tests: small vocabularies and random text.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/vocab.h"

namespace layerstream::testing {

inline constexpr const char* kSp = "\xE2\x96\x81";  // "▁"

// A llama vocabulary: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then
// `pieces` as normal tokens with the given scores. with_bytes=false leaves
// the byte tokens out.
TokenizerVocab spm_vocab(const std::vector<std::pair<std::string, float>>& pieces, bool with_bytes = true);

// Tokenizer::create(v); a test failure (then abort) when v is rejected.
std::unique_ptr<Tokenizer> make_tokenizer(TokenizerVocab v);

// Id of `text` in v (aborts the test if absent).
int32_t id_of(const TokenizerVocab& v, const std::string& text);

// The GPT-2 byte-to-character mapping, written from its definition
// (printable Latin-1 bytes map to themselves, the rest to U+0100.. in order).
std::string gpt2_char(uint8_t byte);
// Maps every byte of s with gpt2_char.
std::string gpt2_map(const std::string& s);

// A gpt2 vocabulary: the 256 byte characters (id = byte), then `extra`
// pieces (already GPT-2 mapped), then <|endoftext|> and <|eot_id|> (control).
TokenizerVocab bpe_vocab(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                         const std::string& pre);

// Random well-formed UTF-8 of up to max_chars characters, mixing ASCII
// letters, spaces, newlines, punctuation, "▁", 2/3/4-byte characters.
std::string random_utf8(std::mt19937_64& rng, size_t max_chars);

}  // namespace layerstream::testing

// The vocabulary of the generated example model: a small SentencePiece
// ("llama") vocabulary that round-trips any text through byte fallback.
#pragma once

#include <cstdint>

#include "layerstream/status.h"
#include "runtime/tokenizer/vocab.h"

namespace layerstream {

// Smallest vocabulary make_example_vocab() accepts: 3 specials + 256 bytes +
// enough pieces to be useful.
inline constexpr uint32_t kMinExampleVocabSize = 512;

// Builds the example vocabulary of exactly `vocab_size` tokens, deterministic
// for a given size:
//   0 <unk> (unknown), 1 <s> (control, BOS), 2 </s> (control, EOS),
//   3..258 the byte tokens <0x00>..<0xFF> (type byte),
//   then "▁", single characters, English words with every prefix, letter
//   pairs and triples (with and without "▁"), normal tokens with strictly
//   decreasing scores, and "<unused_N>" (type unused) if still short.
// With Tokenizer, decode(encode(t)) == t for every string t.
// REQUIRES: vocab_size >= kMinExampleVocabSize (aborts otherwise; use
// try_make_example_vocab for a Status).
TokenizerVocab make_example_vocab(uint32_t vocab_size);

// As make_example_vocab, but InvalidArgument when vocab_size < kMinExampleVocabSize.
Result<TokenizerVocab> try_make_example_vocab(uint32_t vocab_size);

}  // namespace layerstream

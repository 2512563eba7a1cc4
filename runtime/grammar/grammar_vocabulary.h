// GrammarVocabulary: the model's vocabulary as the grammar engine sees it.
// Each token is the bytes it adds to the output (Tokenizer::token_to_piece:
// byte-fallback <0xXX> tokens are their byte, byte-level BPE symbols are
// mapped back to bytes, SentencePiece's "▁" is a space), so the engine takes
// the list as already decoded (xgrammar's "raw" vocabulary type) whatever the
// tokenizer model. Tokens that add no text (control, unknown, unused) are
// empty, which the engine never allows; end-of-generation tokens are the stop
// ids, allowed exactly where the constraint is complete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream::grammar {

struct GrammarVocabulary {
  std::vector<std::string> pieces;  // index = token id; "" = never allowed
  std::vector<int32_t> stop_ids;    // the tokenizer's end-of-generation ids, ascending
  // Rows of the output head (>= pieces.size()): the bitmask covers them all;
  // ids past the vocabulary are padding and never allowed.
  int32_t logits_size = 0;
};

// logits_size: the head's row count, 0 for the tokenizer's vocab_size().
// InvalidArgument when logits_size is below the vocabulary's size; Unsupported
// when the vocabulary has no end-of-generation token (a constrained output
// could never end).
Result<GrammarVocabulary> make_grammar_vocabulary(const Tokenizer& tokenizer, int32_t logits_size = 0);

}  // namespace layerstream::grammar

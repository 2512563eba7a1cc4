// The real models' vocabularies for the grammar suites: SmolLM2-135M
// (byte-level BPE, 49152 tokens) and gemma-3-270m (SentencePiece with byte
// fallback, 262144 tokens), from $LAYERSTREAM_MODELS as
// bench/peer/fetch-models.sh puts them. Loaded and compiled once per process
// (a compiler for gemma's vocabulary takes a while to index).
#pragma once

#include <memory>
#include <string>

#include "runtime/grammar/grammar_compiler.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream::grammar::testing {

struct RealVocab {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<GrammarCompiler> compiler;  // null in a build without the grammar engine
};

// "smollm2" or "gemma3". Sets `skip` (and returns null) when
// LAYERSTREAM_MODELS is unset; sets `error` when it is set but the file is
// missing or does not load (the fetch failed: the suite must fail).
const RealVocab* real_vocab(const std::string& model, std::string* skip, std::string* error);

}  // namespace layerstream::grammar::testing

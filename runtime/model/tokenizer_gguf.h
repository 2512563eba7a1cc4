// Glue between GGUF metadata (tokenizer.ggml.*) and TokenizerVocab.
#pragma once

#include "layerstream/status.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/gguf_writer.h"
#include "runtime/tokenizer/vocab.h"

namespace layerstream {

// Reads the tokenizer description from a parsed file.
// NotFound "model has no tokenizer (tokenizer.ggml.model missing)" when the
// file carries none; Corruption on a key of the wrong type or a token id
// outside the vocabulary; Unsupported for a tokenizer model other than
// "llama" or "gpt2".
Result<TokenizerVocab> read_tokenizer_vocab(const GgufFile& file);

// Adds the tokenizer.ggml.* keys describing `vocab` to a writer.
Status add_tokenizer_metadata(GgufWriter& writer, const TokenizerVocab& vocab);

}  // namespace layerstream

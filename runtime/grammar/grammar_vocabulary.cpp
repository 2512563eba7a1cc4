#include "runtime/grammar/grammar_vocabulary.h"

#include <string>

namespace layerstream::grammar {
namespace {

// Tokens that never stand for text in the output: the engine must not allow
// them (token_to_piece renders <unk> as " ⁇ ", which is not what the model meant).
bool adds_no_text(const Tokenizer& tokenizer, int32_t id) {
  if (tokenizer.is_control(id) || tokenizer.vocab().unk_id == id) return true;
  const std::vector<int32_t>& types = tokenizer.vocab().token_types;
  if (types.empty()) return false;
  const auto type = static_cast<TokenType>(types[id]);
  return type == TokenType::kUnknown || type == TokenType::kUnused;
}

}  // namespace

Result<GrammarVocabulary> make_grammar_vocabulary(const Tokenizer& tokenizer, int32_t logits_size) {
  const int32_t n = tokenizer.vocab_size();
  if (logits_size == 0) logits_size = n;
  if (logits_size < n) {
    return Status::InvalidArgument("grammar vocabulary: the output head has " + std::to_string(logits_size) +
                                   " rows, fewer than the tokenizer's " + std::to_string(n) + " tokens");
  }
  GrammarVocabulary v;
  v.logits_size = logits_size;
  v.pieces.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.is_eog(id)) {
      v.stop_ids.push_back(id);
    } else if (!adds_no_text(tokenizer, id)) {
      v.pieces[id] = tokenizer.token_to_piece(id);
    }
  }
  if (v.stop_ids.empty()) {
    return Status::Unsupported(
        "grammar vocabulary: the tokenizer has no end-of-generation token (EOS/EOT), so a constrained output "
        "could not end");
  }
  return v;
}

}  // namespace layerstream::grammar

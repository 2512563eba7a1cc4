// GrammarMatcher: where one sequence's output stands in a compiled grammar.
// Per decode step the sampler asks for the mask of tokens allowed next,
// applies it to the logits (apply_token_bitmask), draws a token and accepts
// it here. The grammar is complete when it accepts an end-of-generation
// token (is_terminated()); that token is allowed only where the output may
// end.
//
// Thread safety: none; one matcher per sequence, used by one thread at a
// time. Many matchers may share one CompiledGrammar.
#pragma once

#include <cstdint>
#include <memory>

#include "layerstream/status.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/token_bitmask.h"

namespace layerstream::grammar {

class GrammarMatcher {
 public:
  // Unsupported when the build has no grammar engine.
  static Result<std::unique_ptr<GrammarMatcher>> create(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  // Fills `mask` (vocab_size() == the grammar's logits_size()) with the
  // tokens allowed next. Returns whether it rules anything out (false: every
  // token is allowed and the sampler may skip the mask). InvalidArgument
  // when the mask's size differs or the grammar has terminated.
  Result<bool> fill_next_token_mask(TokenBitmask& mask);

  // Advances over `id`. InvalidArgument (the state unchanged) when the
  // grammar does not allow it here, it is outside the logits, or the
  // grammar has terminated.
  Status accept_token(int32_t id);

  // True once an end-of-generation token was accepted where the grammar may end.
  bool is_terminated() const;

  // Undoes the latest n accepted tokens (a draft token rejected, a stop
  // string cut back); the matcher keeps the whole history, so any n up to
  // the tokens accepted since create()/reset() works. InvalidArgument for a
  // negative n or one past that.
  Status rollback(int n);

  // Back to the start of the grammar.
  void reset();

  struct Impl;

 private:
  explicit GrammarMatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace layerstream::grammar

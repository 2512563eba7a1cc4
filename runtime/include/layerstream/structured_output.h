// Structured output: a sequence's text constrained, token by token, to what
// a constraint allows: a mask over the logits before sampling (every token
// the constraint rules out at -inf), and the drawn token accepted after. The
// constraint is compiled once per model and text (Model::constrain caches
// it); a TokenConstraint follows one sequence. Context::generate does this
// for GenerateOptions::structured; callers that sample themselves (a
// server's batch) use TokenConstraint directly.
//
// Thread safety: Model::constrain may be called from any thread; a
// TokenConstraint is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "layerstream/status.h"

namespace layerstream {

struct StructuredOutput {
  enum class Kind {
    kNone,
    kJsonObject,  // any JSON object; `text` unused
    kJsonSchema,  // JSON valid under the JSON schema `text`
    kRegex,       // text matching the regular expression `text` as a whole
    kGrammar,     // the GBNF / EBNF grammar `text` (start rule `root`)
    // xgrammar's structural tag, as JSON `text`: literal text and JSON under
    // schemas composed (tool calls: markers around each tool's arguments;
    // forced_tool_calls in layerstream/chat.h writes one).
    kStructuralTag,
  };
  Kind kind = Kind::kNone;
  std::string text;
};

// One sequence's place in a compiled constraint (Model::constrain).
class TokenConstraint {
 public:
  struct Impl;
  explicit TokenConstraint(std::unique_ptr<Impl> impl);
  ~TokenConstraint();
  TokenConstraint(const TokenConstraint&) = delete;
  TokenConstraint& operator=(const TokenConstraint&) = delete;

  // `logits` (n_vocab floats) with every token not allowed next at -inf: a
  // view of a buffer this keeps until the next call (or `logits` itself
  // when everything is allowed). InvalidArgument once terminated().
  Result<std::span<const float>> mask(std::span<const float> logits);
  // Advances over `token`, drawn from mask()'s logits. InvalidArgument
  // (nothing changed) for a token the constraint does not allow here.
  Status accept(int32_t token);
  // True once the output is complete: an end-of-generation token was
  // accepted where the constraint may end.
  bool terminated() const;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace layerstream

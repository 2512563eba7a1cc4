// OutputConstraint: GenerateOptions::structured for one generate() call: the
// constraint compiled once for the model's vocabulary (the compiler is the
// model's, made on first use), and one matcher per sequence that masks the
// logits before sampling and follows the tokens drawn.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "layerstream/context.h"
#include "layerstream/status.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/llama/model_impl.h"

namespace layerstream::llama {

class OutputConstraint {
 public:
  // Unsupported without the grammar engine; InvalidArgument naming the kind
  // when the text does not compile. `structured.kind` must not be kNone.
  static Result<std::unique_ptr<OutputConstraint>> create(Model::Impl& model, const StructuredOutput& structured,
                                                          int sequences);

  // Sequence s's logits with every token the constraint rules out at -inf
  // (a view of a buffer this keeps until the next call).
  Result<std::span<const float>> mask(int s, std::span<const float> logits);
  // Advances sequence s over the token drawn from mask()'s logits.
  Status accept(int s, int32_t token);
  // True once sequence s's output is complete (it accepted an end-of-generation token).
  bool terminated(int s) const;

 private:
  OutputConstraint(std::vector<std::unique_ptr<grammar::GrammarMatcher>> matchers, int32_t logits_size);

  std::vector<std::unique_ptr<grammar::GrammarMatcher>> matchers_;  // per sequence
  grammar::TokenBitmask bitmask_;
  std::vector<float> masked_;
};

}  // namespace layerstream::llama

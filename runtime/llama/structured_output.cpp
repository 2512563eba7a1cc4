// Model::constrain and TokenConstraint (layerstream/structured_output.h)
// over the grammar engine (runtime/grammar).
#include "layerstream/structured_output.h"

#include <utility>
#include <vector>

#include "layerstream/model.h"
#include "runtime/core/status_macros.h"
#include "runtime/grammar/constraint.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/llama/model_impl.h"

namespace layerstream {

struct TokenConstraint::Impl {
  std::unique_ptr<grammar::GrammarMatcher> matcher;
  grammar::TokenBitmask bitmask;
  std::vector<float> masked;
};

namespace {

using grammar::Constraint;

Result<Constraint> constraint_for(const StructuredOutput& s) {
  using K = StructuredOutput::Kind;
  switch (s.kind) {
    case K::kJsonObject:
      return Constraint::json_object();
    case K::kJsonSchema:
      return Constraint::json_schema(s.text);
    case K::kRegex:
      return Constraint::regex(s.text);
    case K::kGrammar:
      return Constraint::grammar(s.text);
    case K::kStructuralTag:
      return Constraint::structural_tag(s.text);
    case K::kNone:
      break;
  }
  return Status::InvalidArgument("structured output: no constraint kind given");
}

// The model's compiler, made on the first request for structured output
// (indexing the vocabulary costs time no unconstrained request should pay).
Result<grammar::GrammarCompiler*> compiler_of(Model::Impl& m) {
  MutexLock lock(m.grammar_mu);
  if (!m.grammar_compiler) {
    LS_ASSIGN_OR_RETURN(grammar::GrammarVocabulary vocab,
                        grammar::make_grammar_vocabulary(*m.tokenizer, static_cast<int32_t>(m.info.vocab)));
    LS_ASSIGN_OR_RETURN(m.grammar_compiler, grammar::GrammarCompiler::create(vocab));
  }
  return m.grammar_compiler.get();
}

}  // namespace

Result<std::unique_ptr<TokenConstraint>> Model::constrain(const StructuredOutput& structured) const {
  LS_ASSIGN_OR_RETURN(const Constraint constraint, constraint_for(structured));
  LS_ASSIGN_OR_RETURN(grammar::GrammarCompiler * compiler, compiler_of(*impl_));
  LS_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::CompiledGrammar> compiled,
                      compiler->compile(constraint));
  const int32_t logits_size = compiled->logits_size();
  LS_ASSIGN_OR_RETURN(std::unique_ptr<grammar::GrammarMatcher> matcher,
                      grammar::GrammarMatcher::create(std::move(compiled)));
  auto impl = std::make_unique<TokenConstraint::Impl>(
      TokenConstraint::Impl{std::move(matcher), grammar::TokenBitmask(logits_size), {}});
  return std::make_unique<TokenConstraint>(std::move(impl));
}

TokenConstraint::TokenConstraint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TokenConstraint::~TokenConstraint() = default;

Result<std::span<const float>> TokenConstraint::mask(std::span<const float> logits) {
  LS_ASSIGN_OR_RETURN(const bool restricts, impl_->matcher->fill_next_token_mask(impl_->bitmask));
  if (!restricts) return logits;
  impl_->masked.assign(logits.begin(), logits.end());
  grammar::apply_token_bitmask(impl_->bitmask, impl_->masked);
  return std::span<const float>(impl_->masked);
}

Status TokenConstraint::accept(int32_t token) { return impl_->matcher->accept_token(token); }

bool TokenConstraint::terminated() const { return impl_->matcher->is_terminated(); }

}  // namespace layerstream

#include "runtime/llama/structured_output.h"

#include <utility>

#include "runtime/core/status_macros.h"
#include "runtime/grammar/constraint.h"

namespace layerstream::llama {
namespace {

using grammar::Constraint;

Result<Constraint> constraint_for(const StructuredOutput& s) {
  using K = StructuredOutput::Kind;
  switch (s.kind) {
    case K::kJsonObject: return Constraint::json_object();
    case K::kJsonSchema: return Constraint::json_schema(s.text);
    case K::kRegex: return Constraint::regex(s.text);
    case K::kGrammar: return Constraint::grammar(s.text);
    case K::kNone: break;
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

OutputConstraint::OutputConstraint(std::vector<std::unique_ptr<grammar::GrammarMatcher>> matchers,
                                   int32_t logits_size)
    : matchers_(std::move(matchers)), bitmask_(logits_size) {}

Result<std::unique_ptr<OutputConstraint>> OutputConstraint::create(Model::Impl& model,
                                                                   const StructuredOutput& structured,
                                                                   int sequences) {
  LS_ASSIGN_OR_RETURN(const Constraint constraint, constraint_for(structured));
  LS_ASSIGN_OR_RETURN(grammar::GrammarCompiler * compiler, compiler_of(model));
  LS_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::CompiledGrammar> compiled, compiler->compile(constraint));
  std::vector<std::unique_ptr<grammar::GrammarMatcher>> matchers;
  for (int s = 0; s < sequences; ++s) {
    LS_ASSIGN_OR_RETURN(std::unique_ptr<grammar::GrammarMatcher> m, grammar::GrammarMatcher::create(compiled));
    matchers.push_back(std::move(m));
  }
  return std::unique_ptr<OutputConstraint>(new OutputConstraint(std::move(matchers), compiled->logits_size()));
}

Result<std::span<const float>> OutputConstraint::mask(int s, std::span<const float> logits) {
  LS_ASSIGN_OR_RETURN(const bool restricts, matchers_[s]->fill_next_token_mask(bitmask_));
  if (!restricts) return logits;
  masked_.assign(logits.begin(), logits.end());
  grammar::apply_token_bitmask(bitmask_, masked_);
  return std::span<const float>(masked_);
}

Status OutputConstraint::accept(int s, int32_t token) { return matchers_[s]->accept_token(token); }

bool OutputConstraint::terminated(int s) const { return matchers_[s]->is_terminated(); }

}  // namespace layerstream::llama

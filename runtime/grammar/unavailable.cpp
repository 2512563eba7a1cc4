// The grammar API in a build without xgrammar (LAYERSTREAM_STRUCTURED_OUTPUT
// OFF, or AUTO with no build of it found): every entry point that would
// need the engine answers Unsupported, naming what is missing and how to get
// it. No CompiledGrammar, GrammarCompiler or GrammarMatcher is ever made, so
// their other members are never reached.
#include <cstdlib>
#include <string>

#include "runtime/core/status_macros.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/grammar_matcher.h"

namespace layerstream::grammar {
namespace {

Status missing_engine() {
  return Status::Unsupported(
      "structured output (JSON mode, JSON schema, regex, grammars) needs the xgrammar library, and this build of "
      "layerstream was configured without it: run tests/install-xgrammar.sh, then configure again "
      "(LAYERSTREAM_STRUCTURED_OUTPUT=AUTO or ON)");
}

// The members of objects that cannot exist in this build.
[[noreturn]] void no_engine() {
  LS_CHECK_MSG(false, "no grammar engine in this build, so no grammar object exists");
  std::abort();
}

}  // namespace

bool structured_output_available() { return false; }

struct CompiledGrammar::Impl {};
struct GrammarCompiler::Impl {};
struct GrammarMatcher::Impl {};

CompiledGrammar::CompiledGrammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledGrammar::~CompiledGrammar() = default;
int32_t CompiledGrammar::logits_size() const { no_engine(); }
int64_t CompiledGrammar::memory_bytes() const { no_engine(); }

GrammarCompiler::GrammarCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrammarCompiler::~GrammarCompiler() = default;
Result<std::unique_ptr<GrammarCompiler>> GrammarCompiler::create(const GrammarVocabulary&, GrammarCompilerOptions) {
  return missing_engine();
}
Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile(const Constraint&) { return missing_engine(); }
int32_t GrammarCompiler::logits_size() const { no_engine(); }
int64_t GrammarCompiler::cache_bytes() const { no_engine(); }

GrammarMatcher::GrammarMatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrammarMatcher::~GrammarMatcher() = default;
Result<std::unique_ptr<GrammarMatcher>> GrammarMatcher::create(std::shared_ptr<const CompiledGrammar>) {
  return missing_engine();
}
Result<bool> GrammarMatcher::fill_next_token_mask(TokenBitmask&) { return missing_engine(); }
Status GrammarMatcher::accept_token(int32_t) { return missing_engine(); }
bool GrammarMatcher::is_terminated() const { return false; }
Status GrammarMatcher::rollback(int) { return missing_engine(); }
void GrammarMatcher::reset() {}

}  // namespace layerstream::grammar

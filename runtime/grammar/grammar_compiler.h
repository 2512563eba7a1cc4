// GrammarCompiler: turns a Constraint into a CompiledGrammar for one
// vocabulary. Compiling indexes, for every grammar state, which of the
// vocabulary's tokens it allows, so that filling a mask per decode step is
// cheap; that costs milliseconds for a JSON schema (and more for a big
// vocabulary), so compiled grammars are cached by the constraint's text and
// format: a model keeps one compiler, and requests that repeat a schema
// compile it once.
//
// The engine is xgrammar's C++ core. A build configured without it
// (LAYERSTREAM_STRUCTURED_OUTPUT, cmake/LayerstreamXgrammar.cmake) has the
// same API, and create() answers Unsupported naming what is missing.
//
// Thread safety: compile() and the accessors may be called from any number
// of threads at once. A CompiledGrammar is immutable and shared by the
// matchers of any number of sequences.
#pragma once

#include <cstdint>
#include <memory>

#include "layerstream/status.h"
#include "runtime/grammar/constraint.h"
#include "runtime/grammar/grammar_vocabulary.h"

namespace layerstream::grammar {

// True when this build has the grammar engine (structured output works).
bool structured_output_available();

class CompiledGrammar {
 public:
  struct Impl;
  explicit CompiledGrammar(std::unique_ptr<Impl> impl);
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  // Bits of a TokenBitmask for this grammar (the vocabulary's logits_size).
  int32_t logits_size() const;
  // What the compiled grammar holds, in bytes (approximate).
  int64_t memory_bytes() const;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

struct GrammarCompilerOptions {
  // Threads one compile() may use (0: the machine's cores, at most 8).
  int max_threads = 0;
  // Bound of the compiled-grammar cache (least recently used leave first).
  int64_t cache_limit_bytes = int64_t{256} << 20;
};

class GrammarCompiler {
 public:
  // Unsupported when the build has no grammar engine.
  static Result<std::unique_ptr<GrammarCompiler>> create(const GrammarVocabulary& vocabulary,
                                                         GrammarCompilerOptions options = {});
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // InvalidArgument naming the kind (json_schema, regex, grammar) and the
  // engine's reason when the text does not parse or uses what the engine
  // does not support. The same constraint again is served from the cache.
  Result<std::shared_ptr<const CompiledGrammar>> compile(const Constraint& constraint);

  int32_t logits_size() const;
  // Bytes the cache holds now.
  int64_t cache_bytes() const;

  struct Impl;

 private:
  explicit GrammarCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace layerstream::grammar

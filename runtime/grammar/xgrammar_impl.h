// The grammar area's objects over xgrammar's (only in builds with the engine,
// LAYERSTREAM_HAVE_XGRAMMAR): what CompiledGrammar and GrammarCompiler hold,
// and how an engine exception becomes a Status.
#pragma once

#include <xgrammar/xgrammar.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <vector>
#include <string_view>

#include "layerstream/status.h"
#include "runtime/grammar/grammar_compiler.h"

namespace layerstream::grammar {

struct CompiledGrammar::Impl {
  xgrammar::CompiledGrammar compiled;
  int32_t logits_size;
  // Tokens the engine may allow that the output format forbids, in
  // increasing order: for JSON, tokens holding a raw control byte (JSON
  // allows none but whitespace; the engine's string rule lets them into
  // strings, and strict parsers then refuse the text).
  std::shared_ptr<const std::vector<int32_t>> ruled_out;
};

struct GrammarCompiler::Impl {
  xgrammar::GrammarCompiler compiler;
  int32_t logits_size;
  std::shared_ptr<const std::vector<int32_t>> json_control_tokens;  // CompiledGrammar::Impl::ruled_out for JSON
};

// The engine's reason without its "[time] file:line: " prefix, as
// `context: reason`; InvalidArgument, or OutOfBudget for std::bad_alloc.
Status engine_error(std::string_view context, const std::exception& e);

}  // namespace layerstream::grammar

// GrammarCompiler over xgrammar::GrammarCompiler, whose own cache (keyed by
// the schema, pattern or grammar text and the JSON format) serves repeats.
#include <algorithm>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/json_formats.h"
#include "runtime/grammar/xgrammar_impl.h"

namespace layerstream::grammar {
namespace {

int compile_threads(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

xgrammar::CompiledGrammar compile_with(xgrammar::GrammarCompiler& compiler, const Constraint& c) {
  const JsonFormat& f = c.format;
  std::optional<int> max_run;
  if (f.any_whitespace && f.max_whitespace_run > 0) max_run = f.max_whitespace_run;
  // Compact layout when !any_whitespace: no indent, "," and ": " (xgrammar's defaults).
  switch (c.kind) {
    case ConstraintKind::kJsonObject:
      // Any object: the schema {"type": "object"} with additional properties
      // of any JSON value (xgrammar's built-in JSON grammar also allows a
      // top-level array, which JSON mode must not).
      return compiler.CompileJSONSchema(R"({"type": "object"})", f.any_whitespace, std::nullopt, std::nullopt,
                                        /*strict_mode=*/false, max_run);
    case ConstraintKind::kJsonSchema:
      return compiler.CompileJSONSchema(strict_formats(c.text), f.any_whitespace, std::nullopt, std::nullopt,
                                        f.strict, max_run);
    case ConstraintKind::kRegex: return compiler.CompileRegex(c.text);
    case ConstraintKind::kGrammar: return compiler.CompileGrammar(c.text, "root");
    case ConstraintKind::kStructuralTag: return compiler.CompileStructuralTag(c.text);
  }
  throw std::invalid_argument("unknown constraint kind");
}

}  // namespace

Status engine_error(std::string_view context, const std::exception& e) {
  std::string_view reason = e.what();
  // xgrammar's LogFatalError: "[12:34:56] /path/file.cc:123: reason\n".
  if (reason.starts_with('[')) {
    const size_t close = reason.find("] ");
    const size_t colon = close == std::string_view::npos ? close : reason.find(": ", close + 2);
    if (colon != std::string_view::npos) reason.remove_prefix(colon + 2);
  }
  while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.remove_suffix(1);
  std::string msg = std::string(context) + ": " + std::string(reason);
  if (dynamic_cast<const std::bad_alloc*>(&e)) return Status::OutOfBudget(std::move(msg));
  return Status::InvalidArgument(std::move(msg));
}

bool structured_output_available() { return true; }

CompiledGrammar::CompiledGrammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledGrammar::~CompiledGrammar() = default;
int32_t CompiledGrammar::logits_size() const { return impl_->logits_size; }
int64_t CompiledGrammar::memory_bytes() const { return static_cast<int64_t>(impl_->compiled.MemorySizeBytes()); }

namespace {

// The ids whose bytes hold a control character other than JSON's whitespace
// (tab, newline, carriage return).
std::shared_ptr<const std::vector<int32_t>> json_control_tokens(const std::vector<std::string>& pieces) {
  auto ids = std::make_shared<std::vector<int32_t>>();
  for (size_t id = 0; id < pieces.size(); ++id)
    for (unsigned char c : pieces[id])
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
        ids->push_back(static_cast<int32_t>(id));
        break;
      }
  return ids;
}

}  // namespace

GrammarCompiler::GrammarCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrammarCompiler::~GrammarCompiler() = default;

Result<std::unique_ptr<GrammarCompiler>> GrammarCompiler::create(const GrammarVocabulary& vocabulary,
                                                                 GrammarCompilerOptions options) {
  const auto n = static_cast<int64_t>(vocabulary.pieces.size());
  if (n == 0 || vocabulary.logits_size < n) {
    return Status::InvalidArgument("grammar compiler: the vocabulary has " + std::to_string(n) +
                                   " tokens and logits_size " + std::to_string(vocabulary.logits_size) +
                                   " (needs at least one token and logits_size >= tokens)");
  }
  for (int32_t id : vocabulary.stop_ids) {
    if (id < 0 || id >= n) return Status::InvalidArgument("grammar compiler: stop id " + std::to_string(id) +
                                                          " is outside the vocabulary");
  }
  if (options.max_threads < 0 || options.cache_limit_bytes < 0) {
    return Status::InvalidArgument("grammar compiler: max_threads and cache_limit_bytes must not be negative");
  }
  try {
    xgrammar::TokenizerInfo info(vocabulary.pieces, xgrammar::VocabType::RAW, vocabulary.logits_size,
                                 vocabulary.stop_ids, /*add_prefix_space=*/false);
    xgrammar::GrammarCompiler compiler(info, compile_threads(options.max_threads), /*cache_enabled=*/true,
                                       options.cache_limit_bytes);
    return std::unique_ptr<GrammarCompiler>(
        new GrammarCompiler(std::make_unique<Impl>(
            Impl{std::move(compiler), vocabulary.logits_size, json_control_tokens(vocabulary.pieces)})));
  } catch (const std::exception& e) {
    return engine_error("grammar compiler", e);
  }
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile(const Constraint& constraint) {
  if (constraint.kind != ConstraintKind::kJsonObject && constraint.text.empty()) {
    return Status::InvalidArgument(std::string(constraint_kind_name(constraint.kind)) + ": the text is empty");
  }
  try {
    xgrammar::CompiledGrammar compiled = compile_with(impl_->compiler, constraint);
    // A structural tag's JSON (tool calls' arguments) is JSON too.
    const bool json =
        constraint.kind != ConstraintKind::kRegex && constraint.kind != ConstraintKind::kGrammar;
    return std::shared_ptr<const CompiledGrammar>(std::make_shared<CompiledGrammar>(std::make_unique<CompiledGrammar::Impl>(
        CompiledGrammar::Impl{std::move(compiled), impl_->logits_size, json ? impl_->json_control_tokens : nullptr})));
  } catch (const std::exception& e) {
    return engine_error(constraint_kind_name(constraint.kind), e);
  }
}

int32_t GrammarCompiler::logits_size() const { return impl_->logits_size; }
int64_t GrammarCompiler::cache_bytes() const { return impl_->compiler.GetCacheSizeBytes(); }

}  // namespace layerstream::grammar

// Constraint: what a request asks its output to be (structured output), as
// text the grammar engine compiles: any JSON object (JSON mode), JSON that
// validates against a JSON schema, a regular expression, or an EBNF grammar
// in llama.cpp's GBNF notation (rules `name ::= ...`, the start rule `root`).
// A plain value; GrammarCompiler::compile() checks the text.
#pragma once

#include <string>
#include <string_view>

namespace layerstream::grammar {

enum class ConstraintKind {
  kJsonObject,  // any JSON object (OpenAI response_format json_object; not an array or scalar)
  kJsonSchema,  // JSON valid under `text`, a JSON schema (response_format json_schema)
  kRegex,       // the whole output matches `text` (no anchors needed)
  kGrammar,     // `text` is an EBNF / GBNF grammar with a `root` rule
  kStructuralTag,  // `text` is xgrammar's structural tag JSON (tags around JSON under schemas)
};

// "json_object", "json_schema", "regex", "grammar", "structural_tag": how errors name a kind.
std::string_view constraint_kind_name(ConstraintKind kind);

// How JSON (JSON mode or under a schema) may be laid out. Models write better JSON with
// some freedom of whitespace, but unlimited whitespace lets a weak model
// loop on newlines; so whitespace runs are bounded by default.
struct JsonFormat {
  bool any_whitespace = true;   // false: compact, "," and ": " separators only
  int max_whitespace_run = 16;  // with any_whitespace: longest run of whitespace (0 = unbounded)
  // kJsonSchema: a schema's objects without "additionalProperties" (and
  // arrays without "items") allow nothing more than they name, as OpenAI's
  // strict mode. JSON mode allows any object whatever this says.
  bool strict = true;
};

struct Constraint {
  ConstraintKind kind = ConstraintKind::kJsonObject;
  std::string text;         // the schema, pattern or grammar; empty for kJsonObject
  JsonFormat format;        // kJsonObject and kJsonSchema

  static Constraint json_object(JsonFormat format = {});
  static Constraint json_schema(std::string schema, JsonFormat format = {});
  static Constraint regex(std::string pattern);
  static Constraint grammar(std::string ebnf);
  static Constraint structural_tag(std::string tag_json);
};

}  // namespace layerstream::grammar

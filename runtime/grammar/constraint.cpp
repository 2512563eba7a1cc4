#include "runtime/grammar/constraint.h"

#include <utility>

namespace layerstream::grammar {

std::string_view constraint_kind_name(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kJsonObject: return "json_object";
    case ConstraintKind::kJsonSchema: return "json_schema";
    case ConstraintKind::kRegex: return "regex";
    case ConstraintKind::kGrammar: return "grammar";
    case ConstraintKind::kStructuralTag: return "structural_tag";
  }
  return "unknown";
}

Constraint Constraint::json_object(JsonFormat format) {
  return Constraint{ConstraintKind::kJsonObject, {}, format};
}

Constraint Constraint::json_schema(std::string schema, JsonFormat format) {
  return Constraint{ConstraintKind::kJsonSchema, std::move(schema), format};
}

Constraint Constraint::regex(std::string pattern) {
  return Constraint{ConstraintKind::kRegex, std::move(pattern), {}};
}

Constraint Constraint::grammar(std::string ebnf) {
  return Constraint{ConstraintKind::kGrammar, std::move(ebnf), {}};
}

Constraint Constraint::structural_tag(std::string tag_json) {
  return Constraint{ConstraintKind::kStructuralTag, std::move(tag_json), {}};
}

}  // namespace layerstream::grammar

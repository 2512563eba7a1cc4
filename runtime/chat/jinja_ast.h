// The parsed form of a Jinja template (runtime/chat/jinja.h): expression
// and statement nodes, built by jinja_parse.cpp, walked by jinja_render.cpp.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/chat/jinja.h"

namespace layerstream::chat::jinja {

// Template errors travel as exceptions inside the engine and become a Status
// at Template::parse / render.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,
    kName,
    kAttr,
    kItem,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kNot,
    kNeg,
    kBinary,
    kTernary,
    kList,
    kDict,
    kTuple
  };
  Kind kind = Kind::kLiteral;
  Value literal;
  std::string name;      // kName, kAttr, kFilter, kTest; kBinary: the operator
  bool negated = false;  // kTest: `is not`
  std::vector<ExprPtr>
      args;  // operands / call arguments (kSlice: object, start, stop, step, null when absent)
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::shared_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kBody };
  Kind kind = Kind::kText;
  int line = 0;
  std::string text;                                // kText; kSet/kSetBlock/kMacro: the name
  std::string attr;                                // kSet on ns.attr: the attribute
  ExprPtr expr;                                    // kOutput, kSet value, kFor iterable
  ExprPtr cond;                                    // kFor `if`
  std::vector<std::string> targets;                // kFor loop variables; kMacro parameters
  std::vector<ExprPtr> defaults;                   // kMacro: per parameter, or null
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf
  Body body, else_body;                            // kFor, kMacro, kSetBlock, kBody; else (kIf, kFor)
};

}  // namespace layerstream::chat::jinja

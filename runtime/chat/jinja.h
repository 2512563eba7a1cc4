// A small Jinja engine for chat templates: the subset that the chat
// templates of real models use (Llama 3, Qwen2.5/ChatML, Mistral, Gemma,
// SmolLM2, ...), rendered like Hugging Face's apply_chat_template renders
// them (jinja2 with trim_blocks and lstrip_blocks; tojson as json.dumps).
//
// Covered: {{ }}, {% %}, {# #} with '-' whitespace control; if/elif/else,
// for (tuple targets, `if` filter, else, loop.*), set (also ns.attr and
// block set), macro, break/continue; expressions with Python's operators,
// precedence and truthiness, slices, literals, calls, filters, `is` tests;
// globals range, namespace, raise_exception, strftime_now; the string, list
// and dict methods templates call (strip, split, startswith, items, get, ...).
// Not covered: template inheritance, include, call blocks, autoescape.
//
// Thread safety: a parsed Template is immutable; render may run on several
// threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layerstream/status.h"

namespace layerstream::chat::jinja {

class Value;
using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };
  using Array = std::vector<Value>;
  // A dict that keeps insertion order (as Python's does).
  struct Object {
    std::vector<std::pair<std::string, Value>> items;
    Value& operator[](const std::string& key);
    const Value* find(const std::string& key) const;
  };
  using Function = std::function<Value(const Args&, const Kwargs&)>;

  Value() = default;  // undefined
  explicit Value(bool b) : kind_(Kind::kBool), i_(b) {}
  explicit Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
  explicit Value(int i) : kind_(Kind::kInt), i_(i) {}
  explicit Value(double d) : kind_(Kind::kFloat), d_(d) {}
  explicit Value(std::string s) : kind_(Kind::kString), s_(std::make_shared<std::string>(std::move(s))) {}
  explicit Value(const char* s) : Value(std::string(s)) {}
  explicit Value(Array a) : kind_(Kind::kArray), a_(std::make_shared<Array>(std::move(a))) {}
  explicit Value(Object o) : kind_(Kind::kObject), o_(std::make_shared<Object>(std::move(o))) {}
  explicit Value(Function f) : kind_(Kind::kFunction), f_(std::make_shared<Function>(std::move(f))) {}
  static Value none() {
    Value v;
    v.kind_ = Kind::kNone;
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool truthy() const;
  int64_t as_int() const;
  double as_float() const;
  const std::string& str() const { return *s_; }
  Array& array() const { return *a_; }  // shared: a copy of the Value sees changes
  Object& object() const { return *o_; }
  const Function& function() const { return *f_; }

  // Python's str() of the value ("None", "True", "['a', 1]"); undefined: "".
  std::string to_string() const;
  // json.dumps(value, ensure_ascii=False, indent=indent) (indent < 0: none).
  std::string to_json(int indent = -1) const;
  bool equals(const Value& other) const;

 private:
  Kind kind_ = Kind::kUndefined;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<std::string> s_;
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<Function> f_;
};

struct Node;

class Template {
 public:
  // Corruption naming the line and what was expected on a syntax error.
  static Result<std::shared_ptr<const Template>> parse(const std::string& source);
  // InvalidArgument with the message on an error while rendering (including
  // raise_exception's).
  Result<std::string> render(const Value::Object& variables) const;
  ~Template();

 private:
  std::shared_ptr<Node> root_;
};

}  // namespace layerstream::chat::jinja

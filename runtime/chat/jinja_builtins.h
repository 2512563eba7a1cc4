// What the renderer and its filters share (internal to the Jinja engine):
// Python's string methods as templates use them, argument lookup, and the
// value rules of iteration, length, ordering and `in`; and the filters as a
// name -> function table (jinja_filters.cpp) over the renderer's hooks.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/chat/jinja_ast.h"

namespace layerstream::chat::jinja {

extern const std::string kSpace;  // Python's str.strip() whitespace

std::string strip(const std::string& s, const std::string& chars, bool left, bool right);
std::string replace_all(std::string s, const std::string& from, const std::string& to, int64_t count = -1);
// str.split(sep, maxsplit): sep undefined or none splits on whitespace runs.
Value split(const std::string& s, const Value& sep, int64_t maxsplit);
std::string upper(std::string s);
std::string lower(std::string s);
std::string capitalize(const std::string& s);
std::string title(const std::string& s);

// Argument `name` (keyword) or at position `i`, else `fallback`. By value:
// fallbacks are temporaries.
Value arg(const Args& a, size_t i, const Kwargs& kw, const char* name, const Value& fallback);
// What a for loop iterates: list items, dict keys, string characters.
Value::Array items_of(const Value& v);
int64_t length_of(const Value& v);
// -1, 0, 1 for numbers or strings; Error otherwise.
int compare(const Value& a, const Value& b);
// `needle in hay`.
bool contains(const Value& hay, const Value& needle);

// What the filters need of the renderer.
class FilterHost {
 public:
  virtual Value item(const Value& obj, const Value& key) = 0;
  virtual Value attribute(const Value& obj, const std::string& name) = 0;
  virtual bool test(const std::string& name, const Value& v, const Args& a) = 0;
  virtual Value filter(const std::string& name, const Value& v, const Args& a, const Kwargs& kw) = 0;

 protected:
  ~FilterHost() = default;
};

// `v | name(a, kw)`; Error "unknown filter" for a name the table lacks.
Value apply_filter(FilterHost& host, const std::string& name, const Value& v, const Args& a, const Kwargs& kw);

}  // namespace layerstream::chat::jinja

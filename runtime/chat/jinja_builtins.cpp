// The Jinja engine's shared value rules and string methods (jinja_builtins.h).
#include "runtime/chat/jinja_builtins.h"

#include <algorithm>
#include <cctype>

namespace layerstream::chat::jinja {

const std::string kSpace = " \t\n\r\v\f";

std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && chars.find(s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && chars.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  size_t pos = 0;
  for (int64_t n = 0; (count < 0 || n < count) && (pos = s.find(from, pos)) != std::string::npos; ++n) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

Value split(const std::string& s, const Value& sep, int64_t maxsplit) {
  Value::Array out;
  if (sep.is_undefined() || sep.is_none()) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && kSpace.find(s[i]) != std::string::npos) ++i;
      if (i >= s.size()) break;
      size_t j = i;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit)
        j = s.size();
      else
        while (j < s.size() && kSpace.find(s[j]) == std::string::npos) ++j;
      out.push_back(Value(maxsplit >= 0 && j == s.size() ? strip(s.substr(i), kSpace, false, true)
                                                         : s.substr(i, j - i)));
      i = j;
    }
    return Value(std::move(out));
  }
  const std::string& d = sep.str();
  if (d.empty()) throw Error("split: empty separator");
  size_t i = 0;
  for (size_t j; (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) &&
                 (j = s.find(d, i)) != std::string::npos;
       i = j + d.size())
    out.push_back(Value(s.substr(i, j - i)));
  out.push_back(Value(s.substr(i)));
  return Value(std::move(out));
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}
std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    c = static_cast<char>(start ? std::toupper((unsigned char)c) : std::tolower((unsigned char)c));
    start = !alpha;
  }
  return out;
}

Value arg(const Args& a, size_t i, const Kwargs& kw, const char* name, const Value& fallback) {
  for (const auto& [k, v] : kw)
    if (k == name) return v;
  return i < a.size() ? a[i] : fallback;
}

Value::Array items_of(const Value& v) {
  if (v.is_array()) return v.array();
  if (v.is_object()) {
    Value::Array keys;
    for (const auto& [k, x] : v.object().items) keys.push_back(Value(k));
    return keys;
  }
  if (v.is_string()) {
    Value::Array chars;
    for (char c : v.str()) chars.push_back(Value(std::string(1, c)));
    return chars;
  }
  if (v.is_undefined() || v.is_none()) return {};
  throw Error("'" + v.to_string() + "' is not iterable");
}

int64_t length_of(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(v.str().size());
  if (v.is_array()) return static_cast<int64_t>(v.array().size());
  if (v.is_object()) return static_cast<int64_t>(v.object().items.size());
  if (v.is_undefined()) return 0;
  throw Error("object of this type has no length: " + v.to_string());
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str() ? -1 : a.str() > b.str() ? 1 : 0;
  throw Error("cannot compare '" + a.to_string() + "' and '" + b.to_string() + "'");
}

bool contains(const Value& hay, const Value& needle) {
  if (hay.is_string()) return needle.is_string() && hay.str().find(needle.str()) != std::string::npos;
  if (hay.is_array())
    return std::any_of(hay.array().begin(), hay.array().end(),
                       [&](const Value& v) { return v.equals(needle); });
  if (hay.is_object()) return needle.is_string() && hay.object().find(needle.str()) != nullptr;
  if (hay.is_undefined()) return false;
  throw Error("'in' needs a string, list or dict on the right");
}

}  // namespace layerstream::chat::jinja

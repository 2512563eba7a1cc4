// jinja::Value: Python's truthiness, str(), repr() and json.dumps() of the
// values templates see.
#include <charconv>
#include <cmath>

#include "runtime/chat/jinja_ast.h"

namespace layerstream::chat::jinja {
namespace {

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string py_repr(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
  }
  return out + q;
}

std::string repr(const Value& v) { return v.is_string() ? py_repr(v.str()) : v.to_string(); }

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void json_into(const Value& v, int indent, int level, std::string& out) {
  const std::string nl = indent < 0 ? "" : "\n" + std::string(size_t(indent) * (level + 1), ' ');
  const std::string close_nl = indent < 0 ? "" : "\n" + std::string(size_t(indent) * level, ' ');
  const std::string sep = indent < 0 ? ", " : ",";
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.truthy() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat:
      out += float_repr(v.as_float()) == "inf" ? "Infinity" : float_repr(v.as_float());
      return;
    case Value::Kind::kString:
      out += json_string(v.str());
      return;
    case Value::Kind::kFunction:
      throw Error("a function is not JSON serializable");
    case Value::Kind::kArray: {
      if (v.array().empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < v.array().size(); ++i) {
        out += (i ? sep : "") + nl;
        json_into(v.array()[i], indent, level + 1, out);
      }
      out += close_nl + "]";
      return;
    }
    case Value::Kind::kObject: {
      if (v.object().items.empty()) {
        out += "{}";
        return;
      }
      out += "{";
      bool first = true;
      for (const auto& [k, x] : v.object().items) {
        out += (first ? "" : sep) + nl + json_string(k) + ": ";
        first = false;
        json_into(x, indent, level + 1, out);
      }
      out += close_nl + "}";
      return;
    }
  }
}

}  // namespace

Value& Value::Object::operator[](const std::string& key) {
  for (auto& [k, v] : items)
    if (k == key) return v;
  items.emplace_back(key, Value());
  return items.back().second;
}

const Value* Value::Object::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return d_ != 0;
    case Kind::kString:
      return !s_->empty();
    case Kind::kArray:
      return !a_->empty();
    case Kind::kObject:
      return !o_->items.empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

int64_t Value::as_int() const {
  if (kind_ == Kind::kFloat) return static_cast<int64_t>(d_);
  if (kind_ == Kind::kInt || kind_ == Kind::kBool) return i_;
  throw Error("expected a number, got " + repr(*this));
}

double Value::as_float() const {
  if (kind_ == Kind::kFloat) return d_;
  if (kind_ == Kind::kInt || kind_ == Kind::kBool) return static_cast<double>(i_);
  throw Error("expected a number, got " + repr(*this));
}

std::string Value::to_string() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return i_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return float_repr(d_);
    case Kind::kString:
      return *s_;
    case Kind::kFunction:
      return "<function>";
    case Kind::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < a_->size(); ++i) out += (i ? ", " : "") + repr((*a_)[i]);
      return out + "]";
    }
    case Kind::kObject: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : o_->items) {
        out += (first ? "" : ", ") + py_repr(k) + ": " + repr(v);
        first = false;
      }
      return out + "}";
    }
  }
  return "";
}

std::string Value::to_json(int indent) const {
  std::string out;
  json_into(*this, indent, 0, out);
  return out;
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) return as_float() == o.as_float();
    return i_ == o.i_;
  }
  if (kind_ != o.kind_)
    return (is_undefined() || is_none()) && (o.is_undefined() || o.is_none()) && kind_ == o.kind_;
  switch (kind_) {
    case Kind::kString:
      return *s_ == *o.s_;
    case Kind::kArray: {
      if (a_->size() != o.a_->size()) return false;
      for (size_t i = 0; i < a_->size(); ++i)
        if (!(*a_)[i].equals((*o.a_)[i])) return false;
      return true;
    }
    case Kind::kObject: {
      if (o_->items.size() != o.o_->items.size()) return false;
      for (const auto& [k, v] : o_->items) {
        const Value* x = o.o_->find(k);
        if (!x || !x->equals(v)) return false;
      }
      return true;
    }
    case Kind::kFunction:
      return f_ == o.f_;
    default:
      return true;
  }
}

}  // namespace layerstream::chat::jinja

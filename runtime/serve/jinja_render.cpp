// Rendering a parsed template: scopes, statements, operators, filters,
// tests, methods and globals (runtime/serve/jinja.h lists what is covered).
#include <algorithm>
#include <cmath>
#include <ctime>

#include "runtime/serve/jinja_ast.h"

namespace layerstream::serve::jinja {

NodePtr parse_template(const std::string& source);

namespace {

using Kind = Value::Kind;

struct BreakLoop {};
struct ContinueLoop {};

const std::string kSpace = " \t\n\r\v\f";

std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && chars.find(s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && chars.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, int64_t count = -1) {
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

// Argument `name` (keyword) or at position `i`, else `fallback`. By value:
// fallbacks are temporaries.
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

class Renderer {
 public:
  explicit Renderer(const Value::Object& vars) {
    globals_ = vars;
    add_globals();
    frames_.emplace_back();
  }

  void exec(const Body& body, std::string& out) {
    for (const NodePtr& n : body) exec(*n, out);
  }

 private:
  Value lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it)
      if (const Value* v = it->find(name)) return *v;
    if (const Value* v = globals_.find(name)) return *v;
    return Value();
  }
  void assign(const std::string& name, Value v) { frames_.back()[name] = std::move(v); }

  void exec(const Node& n, std::string& out) {
    try {
      exec_node(n, out);
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind("line ", 0) == 0) throw;
      throw Error("line " + std::to_string(n.line) + ": " + what);
    }
  }

  void exec_node(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::Kind::kText:
        out += n.text;
        return;
      case Node::Kind::kOutput:
        out += eval(*n.expr).to_string();
        return;
      case Node::Kind::kBody:
        exec(n.body, out);
        return;
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches) {
          if (eval(*cond).truthy()) return exec(body, out);
        }
        return exec(n.else_body, out);
      case Node::Kind::kFor:
        return exec_for(n, out);
      case Node::Kind::kSet: {
        Value v = eval(*n.expr);
        if (n.attr.empty()) return assign(n.text, std::move(v));
        Value ns = lookup(n.text);
        if (!ns.is_object())
          throw Error("cannot set '" + n.attr + "' on '" + n.text + "', which is not a namespace");
        ns.object()[n.attr] = std::move(v);
        return;
      }
      case Node::Kind::kSetBlock: {
        std::string s;
        exec(n.body, s);
        return assign(n.text, Value(s));
      }
      case Node::Kind::kMacro:
        return define_macro(n);
      case Node::Kind::kBreak:
        throw BreakLoop{};
      case Node::Kind::kContinue:
        throw ContinueLoop{};
    }
  }

  void exec_for(const Node& n, std::string& out) {
    const Value seq = eval(*n.expr);
    Value::Array all = items_of(seq);
    // The `if` filter runs before the loop, so loop.length counts what passes.
    std::vector<Value> items;
    frames_.emplace_back();
    for (const Value& v : all) {
      if (n.cond) {
        bind_targets(n, v);
        if (!eval(*n.cond).truthy()) continue;
      }
      items.push_back(v);
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      bind_targets(n, items[i]);
      Value::Object loop;
      loop["index"] = Value(i + 1);
      loop["index0"] = Value(i);
      loop["revindex"] = Value(len - i);
      loop["revindex0"] = Value(len - i - 1);
      loop["first"] = Value(i == 0);
      loop["last"] = Value(i == len - 1);
      loop["length"] = Value(len);
      loop["previtem"] = i > 0 ? items[i - 1] : Value();
      loop["nextitem"] = i + 1 < len ? items[i + 1] : Value();
      loop["cycle"] = Value(Value::Function([i](const Args& a, const Kwargs&) {
        if (a.empty()) throw Error("loop.cycle needs arguments");
        return a[static_cast<size_t>(i) % a.size()];
      }));
      frames_.back()["loop"] = Value(std::move(loop));
      try {
        exec(n.body, out);
      } catch (const BreakLoop&) {
        break;
      } catch (const ContinueLoop&) {
      }
    }
    frames_.pop_back();
    if (len == 0) exec(n.else_body, out);
  }

  void bind_targets(const Node& n, const Value& v) {
    if (n.targets.size() == 1) return assign(n.targets[0], v);
    const Value::Array parts = items_of(v);
    if (parts.size() != n.targets.size())
      throw Error("cannot unpack " + std::to_string(parts.size()) + " values into " +
                  std::to_string(n.targets.size()) + " loop variables");
    for (size_t i = 0; i < parts.size(); ++i) assign(n.targets[i], parts[i]);
  }

  void define_macro(const Node& n) {
    const Node* node = &n;
    assign(n.text, Value(Value::Function([this, node](const Args& args, const Kwargs& kwargs) {
             Value::Object frame;
             for (size_t i = 0; i < node->targets.size(); ++i) {
               Value v = i < args.size() ? args[i] : Value();
               for (const auto& [k, x] : kwargs)
                 if (k == node->targets[i]) v = x;
               if (v.is_undefined() && node->defaults[i]) v = eval(*node->defaults[i]);
               frame[node->targets[i]] = v;
             }
             frames_.push_back(std::move(frame));
             std::string s;
             try {
               exec(node->body, s);
             } catch (...) {
               frames_.pop_back();
               throw;
             }
             frames_.pop_back();
             return Value(s);
           })));
  }

  // ---- expressions ----

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return lookup(e.name);
      case Expr::Kind::kAttr:
        return attribute(eval(*e.args[0]), e.name);
      case Expr::Kind::kItem:
        return item(eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::kSlice:
        return slice(e);
      case Expr::Kind::kCall: {
        const Value f = eval(*e.args[0]);
        if (!f.is_function()) throw Error("'" + describe(*e.args[0]) + "' is not callable");
        Args args;
        for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
        Kwargs kw;
        for (const auto& [k, x] : e.kwargs) kw.emplace_back(k, eval(*x));
        return f.function()(args, kw);
      }
      case Expr::Kind::kFilter: {
        Args args;
        for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
        Kwargs kw;
        for (const auto& [k, x] : e.kwargs) kw.emplace_back(k, eval(*x));
        return filter(e.name, eval(*e.args[0]), args, kw);
      }
      case Expr::Kind::kTest: {
        Args args;
        for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
        return Value(test(e.name, eval(*e.args[0]), args) != e.negated);
      }
      case Expr::Kind::kNot:
        return Value(!eval(*e.args[0]).truthy());
      case Expr::Kind::kNeg: {
        const Value v = eval(*e.args[0]);
        return v.kind() == Kind::kFloat ? Value(-v.as_float()) : Value(-v.as_int());
      }
      case Expr::Kind::kTernary:
        return eval(*e.args[0]).truthy() ? eval(*e.args[1]) : eval(*e.args[2]);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        Value::Array a;
        for (const ExprPtr& x : e.args) a.push_back(eval(*x));
        return Value(std::move(a));
      }
      case Expr::Kind::kDict: {
        Value::Object o;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2)
          o[eval(*e.args[i]).to_string()] = eval(*e.args[i + 1]);
        return Value(std::move(o));
      }
      case Expr::Kind::kBinary:
        return binary(e);
    }
    return Value();
  }

  static std::string describe(const Expr& e) {
    return e.kind == Expr::Kind::kName || e.kind == Expr::Kind::kAttr ? e.name : "expression";
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    const Value a = eval(*e.args[0]);
    if (op == "and") return a.truthy() ? eval(*e.args[1]) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.args[1]);
    const Value b = eval(*e.args[1]);
    if (op == "==") return Value(a.equals(b));
    if (op == "!=") return Value(!a.equals(b));
    if (op == "<") return Value(compare(a, b) < 0);
    if (op == ">") return Value(compare(a, b) > 0);
    if (op == "<=") return Value(compare(a, b) <= 0);
    if (op == ">=") return Value(compare(a, b) >= 0);
    if (op == "in" || op == "not in") return Value(contains(b, a) == (op == "in"));
    if (op == "~") return Value(a.to_string() + b.to_string());
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
      if (a.is_array() && b.is_array()) {
        Value::Array c = a.array();
        c.insert(c.end(), b.array().begin(), b.array().end());
        return Value(std::move(c));
      }
      if (!a.is_number() || !b.is_number())
        throw Error("unsupported operand types for +: '" + a.to_string() + "' and '" + b.to_string() + "'");
    }
    if (op == "*" && (a.is_string() || b.is_string())) {
      const Value& s = a.is_string() ? a : b;
      const int64_t n = (a.is_string() ? b : a).as_int();
      std::string r;
      for (int64_t i = 0; i < n; ++i) r += s.str();
      return Value(r);
    }
    if (!a.is_number() || !b.is_number())
      throw Error("unsupported operand types for " + op + ": '" + a.to_string() + "' and '" + b.to_string() +
                  "'");
    const bool ints = a.kind() != Kind::kFloat && b.kind() != Kind::kFloat;
    if (op == "/") {
      if (b.as_float() == 0) throw Error("division by zero");
      return Value(a.as_float() / b.as_float());
    }
    if (op == "**")
      return ints && b.as_int() >= 0
                 ? Value(static_cast<int64_t>(std::llround(std::pow(a.as_float(), b.as_float()))))
                 : Value(std::pow(a.as_float(), b.as_float()));
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (y == 0) throw Error("integer division or modulo by zero");
      const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
      if (op == "//") return Value(q);
      if (op == "%") return Value(x - q * y);
    }
    const double x = a.as_float(), y = b.as_float();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "//") return Value(std::floor(x / y));
    if (op == "%") return Value(x - std::floor(x / y) * y);
    throw Error("unknown operator " + op);
  }

  static bool contains(const Value& hay, const Value& needle) {
    if (hay.is_string()) return needle.is_string() && hay.str().find(needle.str()) != std::string::npos;
    if (hay.is_array())
      return std::any_of(hay.array().begin(), hay.array().end(),
                         [&](const Value& v) { return v.equals(needle); });
    if (hay.is_object()) return needle.is_string() && hay.object().find(needle.str()) != nullptr;
    if (hay.is_undefined()) return false;
    throw Error("'in' needs a string, list or dict on the right");
  }

  Value item(const Value& obj, const Value& key) {
    if (obj.is_object()) {
      if (!key.is_string()) return Value();
      if (const Value* v = obj.object().find(key.str())) return *v;
      return Value();
    }
    if (obj.is_array() || obj.is_string()) {
      if (!key.is_number()) return key.is_string() ? attribute(obj, key.str()) : Value();
      const int64_t n = length_of(obj);
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return obj.is_array() ? obj.array()[i] : Value(std::string(1, obj.str()[i]));
    }
    return Value();
  }

  Value slice(const Expr& e) {
    const Value obj = eval(*e.args[0]);
    const int64_t n = length_of(obj);
    auto get = [&](size_t i) -> std::optional<int64_t> {
      if (!e.args[i]) return std::nullopt;
      const Value v = eval(*e.args[i]);
      if (v.is_none()) return std::nullopt;
      return v.as_int();
    };
    const int64_t step = get(3).value_or(1);
    if (step == 0) throw Error("slice step cannot be zero");
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      int64_t x = *v < 0 ? *v + n : *v;
      return step > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t start = clamp(get(1), step > 0 ? 0 : n - 1), stop = clamp(get(2), step > 0 ? n : -1);
    Value::Array out;
    std::string s;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (obj.is_string())
        s += obj.str()[i];
      else
        out.push_back(obj.array()[i]);
    }
    return obj.is_string() ? Value(s) : Value(std::move(out));
  }

  Value bound(std::function<Value(const Args&, const Kwargs&)> f) {
    return Value(Value::Function(std::move(f)));
  }

  Value attribute(const Value& obj, const std::string& name) {
    if (obj.is_object()) {
      if (const Value* v = obj.object().find(name)) return *v;
      if (name == "items")
        return bound([obj](const Args&, const Kwargs&) {
          Value::Array a;
          for (const auto& [k, v] : obj.object().items) a.push_back(Value(Value::Array{Value(k), v}));
          return Value(std::move(a));
        });
      if (name == "keys" || name == "values")
        return bound([obj, name](const Args&, const Kwargs&) {
          Value::Array a;
          for (const auto& [k, v] : obj.object().items) a.push_back(name == "keys" ? Value(k) : v);
          return Value(std::move(a));
        });
      if (name == "get")
        return bound([obj](const Args& a, const Kwargs& kw) {
          const Value key = arg(a, 0, kw, "key", Value());
          const Value* v = key.is_string() ? obj.object().find(key.str()) : nullptr;
          return v ? *v : arg(a, 1, kw, "default", Value::none());
        });
      return Value();
    }
    if (obj.is_string()) {
      const std::string s = obj.str();
      if (name == "strip" || name == "lstrip" || name == "rstrip")
        return bound([s, name](const Args& a, const Kwargs& kw) {
          const Value c = arg(a, 0, kw, "chars", Value());
          const std::string chars = c.is_string() ? c.str() : kSpace;
          return Value(strip(s, chars, name != "rstrip", name != "lstrip"));
        });
      if (name == "startswith" || name == "endswith")
        return bound([s, name](const Args& a, const Kwargs& kw) {
          const Value p = arg(a, 0, kw, "prefix", Value());
          Value::Array options = p.is_array() ? p.array() : Value::Array{p};
          for (const Value& o : options) {
            if (!o.is_string()) throw Error(name + " needs a string");
            const std::string& x = o.str();
            if (x.size() <= s.size() &&
                (name == "startswith" ? s.compare(0, x.size(), x) == 0
                                      : s.compare(s.size() - x.size(), x.size(), x) == 0))
              return Value(true);
          }
          return Value(false);
        });
      if (name == "split")
        return bound([s](const Args& a, const Kwargs& kw) {
          const Value m = arg(a, 1, kw, "maxsplit", Value(int64_t{-1}));
          return split(s, arg(a, 0, kw, "sep", Value()), m.as_int());
        });
      if (name == "upper") return bound([s](const Args&, const Kwargs&) { return Value(upper(s)); });
      if (name == "lower") return bound([s](const Args&, const Kwargs&) { return Value(lower(s)); });
      if (name == "title") return bound([s](const Args&, const Kwargs&) { return Value(title(s)); });
      if (name == "capitalize")
        return bound([s](const Args&, const Kwargs&) { return Value(capitalize(s)); });
      if (name == "replace")
        return bound([s](const Args& a, const Kwargs& kw) {
          return Value(replace_all(s, arg(a, 0, kw, "old", Value("")).to_string(),
                                   arg(a, 1, kw, "new", Value("")).to_string(),
                                   arg(a, 2, kw, "count", Value(int64_t{-1})).as_int()));
        });
      if (name == "find")
        return bound([s](const Args& a, const Kwargs& kw) {
          const size_t p = s.find(arg(a, 0, kw, "sub", Value("")).to_string());
          return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(p));
        });
      if (name == "count")
        return bound([s](const Args& a, const Kwargs& kw) {
          const std::string x = arg(a, 0, kw, "x", Value("")).to_string();
          int64_t n = 0;
          for (size_t p = 0; !x.empty() && (p = s.find(x, p)) != std::string::npos; p += x.size()) ++n;
          return Value(n);
        });
      if (name == "join")
        return bound([s](const Args& a, const Kwargs&) {
          std::string out;
          const Value::Array parts = items_of(a.empty() ? Value() : a[0]);
          for (size_t i = 0; i < parts.size(); ++i) out += (i ? s : "") + parts[i].to_string();
          return Value(out);
        });
      return Value();
    }
    if (obj.is_array()) {
      if (name == "append")
        return bound([obj](const Args& a, const Kwargs&) {
          obj.array().push_back(a.empty() ? Value() : a[0]);
          return Value::none();
        });
      return Value();
    }
    return Value();
  }

  bool test(const std::string& name, const Value& v, const Args& a) {
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "true") return v.kind() == Kind::kBool && v.truthy();
    if (name == "false") return v.kind() == Kind::kBool && !v.truthy();
    if (name == "boolean") return v.kind() == Kind::kBool;
    if (name == "string") return v.is_string();
    if (name == "number") return v.is_number() && v.kind() != Kind::kBool;
    if (name == "integer") return v.kind() == Kind::kInt;
    if (name == "float") return v.kind() == Kind::kFloat;
    if (name == "mapping") return v.is_object();
    if (name == "sequence") return v.is_array() || v.is_string() || v.is_object();
    if (name == "iterable") return v.is_array() || v.is_string() || v.is_object();
    if (name == "callable") return v.is_function();
    if (name == "odd") return v.as_int() % 2 != 0;
    if (name == "even") return v.as_int() % 2 == 0;
    if (name == "divisibleby") return !a.empty() && a[0].as_int() != 0 && v.as_int() % a[0].as_int() == 0;
    if (name == "lower") return v.is_string() && lower(v.str()) == v.str();
    if (name == "upper") return v.is_string() && upper(v.str()) == v.str();
    if (a.empty()) throw Error("unknown test '" + name + "' (or it needs an argument)");
    if (name == "equalto" || name == "eq" || name == "sameas") return v.equals(a[0]);
    if (name == "ne") return !v.equals(a[0]);
    if (name == "lt" || name == "lessthan") return compare(v, a[0]) < 0;
    if (name == "gt" || name == "greaterthan") return compare(v, a[0]) > 0;
    if (name == "le") return compare(v, a[0]) <= 0;
    if (name == "ge") return compare(v, a[0]) >= 0;
    if (name == "in") return contains(a[0], v);
    throw Error("unknown test '" + name + "'");
  }

  Value filter(const std::string& name, const Value& v, const Args& a, const Kwargs& kw) {
    if (name == "trim") {
      const Value c = arg(a, 0, kw, "chars", Value());
      return Value(strip(v.to_string(), c.is_string() ? c.str() : kSpace, true, true));
    }
    if (name == "upper") return Value(upper(v.to_string()));
    if (name == "lower") return Value(lower(v.to_string()));
    if (name == "capitalize") return Value(capitalize(v.to_string()));
    if (name == "title") return Value(title(v.to_string()));
    if (name == "length" || name == "count") return Value(length_of(v));
    if (name == "string") return Value(v.to_string());
    if (name == "safe") return v;
    if (name == "e" || name == "escape") {
      std::string s = v.to_string(), out;
      for (char c : s) {
        if (c == '&')
          out += "&amp;";
        else if (c == '<')
          out += "&lt;";
        else if (c == '>')
          out += "&gt;";
        else if (c == '"')
          out += "&#34;";
        else if (c == '\'')
          out += "&#39;";
        else
          out += c;
      }
      return Value(out);
    }
    if (name == "int") {
      if (v.is_string()) {
        try {
          return Value(static_cast<int64_t>(std::stoll(strip(v.str(), kSpace, true, true))));
        } catch (...) {
          return arg(a, 0, kw, "default", Value(int64_t{0}));
        }
      }
      return v.is_number() ? Value(v.as_int()) : arg(a, 0, kw, "default", Value(int64_t{0}));
    }
    if (name == "float") {
      if (v.is_string()) {
        try {
          return Value(std::stod(v.str()));
        } catch (...) {
          return arg(a, 0, kw, "default", Value(0.0));
        }
      }
      return v.is_number() ? Value(v.as_float()) : arg(a, 0, kw, "default", Value(0.0));
    }
    if (name == "abs")
      return v.kind() == Kind::kFloat ? Value(std::fabs(v.as_float()))
                                      : Value(static_cast<int64_t>(std::llabs(v.as_int())));
    if (name == "round") {
      const int64_t p = arg(a, 0, kw, "precision", Value(int64_t{0})).as_int();
      const double m = std::pow(10.0, static_cast<double>(p));
      return Value(std::nearbyint(v.as_float() * m) / m);
    }
    if (name == "default" || name == "d") {
      const bool boolean = arg(a, 1, kw, "boolean", Value(false)).truthy();
      if (v.is_undefined() || (boolean && !v.truthy())) return arg(a, 0, kw, "default_value", Value(""));
      return v;
    }
    if (name == "first" || name == "last") {
      const Value::Array items = items_of(v);
      if (items.empty()) return Value();
      return name == "first" ? items.front() : items.back();
    }
    if (name == "list") return Value(items_of(v));
    if (name == "reverse") {
      if (v.is_string()) return Value(std::string(v.str().rbegin(), v.str().rend()));
      Value::Array items = items_of(v);
      std::reverse(items.begin(), items.end());
      return Value(std::move(items));
    }
    if (name == "items") return attribute(v, "items").function()({}, {});
    if (name == "join") {
      const std::string sep = arg(a, 0, kw, "d", Value("")).to_string();
      const Value attr = arg(a, 1, kw, "attribute", Value());
      std::string out;
      const Value::Array items = items_of(v);
      for (size_t i = 0; i < items.size(); ++i)
        out += (i ? sep : "") + (attr.is_undefined() ? items[i] : item(items[i], attr)).to_string();
      return Value(out);
    }
    if (name == "replace")
      return Value(replace_all(v.to_string(), arg(a, 0, kw, "old", Value("")).to_string(),
                               arg(a, 1, kw, "new", Value("")).to_string(),
                               arg(a, 2, kw, "count", Value(int64_t{-1})).as_int()));
    if (name == "tojson") {
      const Value indent = arg(a, 0, kw, "indent", Value());
      return Value(v.to_json(indent.is_number() ? static_cast<int>(indent.as_int()) : -1));
    }
    if (name == "indent") {
      const Value w = arg(a, 0, kw, "width", Value(int64_t{4}));
      const std::string pad = w.is_string() ? w.str() : std::string(size_t(w.as_int()), ' ');
      const bool first = arg(a, 1, kw, "first", Value(false)).truthy();
      const bool blank = arg(a, 2, kw, "blank", Value(false)).truthy();
      std::string s = v.to_string(), out;
      size_t start = 0;
      for (bool is_first = true; start <= s.size(); is_first = false) {
        size_t nl = s.find('\n', start);
        const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if ((!is_first || first) && (blank || !line.empty())) out += pad;
        out += line;
        if (nl == std::string::npos) break;
        out += '\n';
        start = nl + 1;
      }
      return Value(out);
    }
    if (name == "sum" || name == "min" || name == "max") {
      const Value::Array items = items_of(v);
      if (name == "sum") {
        Value total(int64_t{0});
        for (const Value& x : items)
          total = total.kind() == Kind::kFloat || x.kind() == Kind::kFloat
                      ? Value(total.as_float() + x.as_float())
                      : Value(total.as_int() + x.as_int());
        return total;
      }
      if (items.empty()) return Value();
      Value best = items[0];
      for (const Value& x : items)
        if ((name == "min") == (compare(x, best) < 0) && compare(x, best) != 0) best = x;
      return best;
    }
    if (name == "unique") {
      Value::Array out;
      for (const Value& x : items_of(v))
        if (!contains(Value(out), x)) out.push_back(x);
      return Value(std::move(out));
    }
    if (name == "sort") {
      Value::Array items = items_of(v);
      const bool reverse = arg(a, 0, kw, "reverse", Value(false)).truthy();
      const Value attr = arg(a, 2, kw, "attribute", Value());
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        const Value kx = attr.is_undefined() ? x : item(x, attr),
                    ky = attr.is_undefined() ? y : item(y, attr);
        return reverse ? compare(kx, ky) > 0 : compare(kx, ky) < 0;
      });
      return Value(std::move(items));
    }
    if (name == "map") {
      Value::Array out;
      const Value attr = arg(a, 99, kw, "attribute", Value());
      for (const Value& x : items_of(v)) {
        if (!attr.is_undefined())
          out.push_back(item(x, attr));
        else if (!a.empty())
          out.push_back(filter(a[0].to_string(), x, Args(a.begin() + 1, a.end()), {}));
        else
          out.push_back(x);
      }
      return Value(std::move(out));
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
      const bool by_attr = name.size() > 6;
      const bool keep = name.rfind("select", 0) == 0;
      Value::Array out;
      for (const Value& x : items_of(v)) {
        Value subject = by_attr ? item(x, a.empty() ? Value() : a[0]) : x;
        const size_t t = by_attr ? 1 : 0;
        const bool pass = a.size() > t ? test(a[t].to_string(), subject, Args(a.begin() + t + 1, a.end()))
                                       : subject.truthy();
        if (pass == keep) out.push_back(x);
      }
      return Value(std::move(out));
    }
    if (name == "wordcount")
      return Value(static_cast<int64_t>(split(v.to_string(), Value(), -1).array().size()));
    throw Error("unknown filter '" + name + "'");
  }

  void add_globals() {
    globals_["range"] = Value(Value::Function([](const Args& a, const Kwargs&) {
      int64_t start = 0, stop = 0, step = 1;
      if (a.size() == 1)
        stop = a[0].as_int();
      else if (a.size() >= 2)
        start = a[0].as_int(), stop = a[1].as_int();
      if (a.size() >= 3) step = a[2].as_int();
      if (step == 0) throw Error("range() step must not be zero");
      Value::Array out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value(i));
      return Value(std::move(out));
    }));
    auto make_dict = [](const Args&, const Kwargs& kw) {
      Value::Object o;
      for (const auto& [k, v] : kw) o[k] = v;
      return Value(std::move(o));
    };
    globals_["namespace"] = Value(Value::Function(make_dict));
    globals_["dict"] = Value(Value::Function(make_dict));
    globals_["raise_exception"] = Value(Value::Function([](const Args& a, const Kwargs&) -> Value {
      throw Error(a.empty() ? "raise_exception" : a[0].to_string());
    }));
    globals_["strftime_now"] = Value(Value::Function([](const Args& a, const Kwargs&) {
      const std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, a.empty() ? "%Y-%m-%d" : a[0].to_string().c_str(), &tm);
      return Value(std::string(buf, n));
    }));
  }

  Value::Object globals_;
  std::vector<Value::Object> frames_;
};

}  // namespace

struct Node;

Result<std::shared_ptr<const Template>> Template::parse(const std::string& source) {
  try {
    auto t = std::shared_ptr<Template>(new Template());
    t->root_ = parse_template(source);
    return std::shared_ptr<const Template>(std::move(t));
  } catch (const Error& e) {
    return Status::Corruption(std::string("chat template: ") + e.what());
  }
}

Result<std::string> Template::render(const Value::Object& variables) const {
  try {
    Renderer r(variables);
    std::string out;
    r.exec(root_->body, out);
    return out;
  } catch (const Error& e) {
    return Status::InvalidArgument(e.what());
  } catch (const BreakLoop&) {
    return Status::InvalidArgument("'break' outside a loop");
  } catch (const ContinueLoop&) {
    return Status::InvalidArgument("'continue' outside a loop");
  }
}

Template::~Template() = default;

}  // namespace layerstream::serve::jinja

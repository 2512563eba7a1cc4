// Rendering a parsed template: scopes, statements, operators, filters,
// tests, methods and globals (runtime/chat/jinja.h lists what is covered).
#include <algorithm>
#include <cmath>
#include <ctime>

#include "runtime/chat/jinja_ast.h"
#include "runtime/chat/jinja_builtins.h"

namespace layerstream::chat::jinja {

NodePtr parse_template(const std::string& source);

namespace {

using Kind = Value::Kind;

struct BreakLoop {};
struct ContinueLoop {};

class Renderer final : public FilterHost {
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

  Value item(const Value& obj, const Value& key) override {
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

  Value attribute(const Value& obj, const std::string& name) override {
    if (obj.is_object()) return dict_attribute(obj, name);
    if (obj.is_string()) return string_method(obj.str(), name);
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

  // A dict's key, or its items / keys / values / get methods.
  Value dict_attribute(const Value& obj, const std::string& name) {
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

  // Python's str methods that templates call.
  Value string_method(const std::string& s, const std::string& name) {
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

  bool test(const std::string& name, const Value& v, const Args& a) override {
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

  Value filter(const std::string& name, const Value& v, const Args& a, const Kwargs& kw) override {
    return apply_filter(*this, name, v, a, kw);
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

}  // namespace layerstream::chat::jinja

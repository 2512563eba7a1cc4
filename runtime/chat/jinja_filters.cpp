// The filters (`value | name(args)`): one function each, found by name in one
// table, so adding a filter is one row (runtime/chat/jinja.h lists them).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "runtime/chat/jinja_builtins.h"

namespace layerstream::chat::jinja {
namespace {

using Kind = Value::Kind;
using Filter = Value (*)(FilterHost& host, const Value& v, const Args& a, const Kwargs& kw);

Value trim(FilterHost&, const Value& v, const Args& a, const Kwargs& kw) {
  const Value c = arg(a, 0, kw, "chars", Value());
  return Value(strip(v.to_string(), c.is_string() ? c.str() : kSpace, true, true));
}

Value escape(FilterHost&, const Value& v, const Args&, const Kwargs&) {
  std::string out;
  for (char c : v.to_string()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(out);
}

Value to_int(FilterHost&, const Value& v, const Args& a, const Kwargs& kw) {
  if (v.is_string()) {
    try {
      return Value(static_cast<int64_t>(std::stoll(strip(v.str(), kSpace, true, true))));
    } catch (...) {
      return arg(a, 0, kw, "default", Value(int64_t{0}));
    }
  }
  return v.is_number() ? Value(v.as_int()) : arg(a, 0, kw, "default", Value(int64_t{0}));
}

Value to_float(FilterHost&, const Value& v, const Args& a, const Kwargs& kw) {
  if (v.is_string()) {
    try {
      return Value(std::stod(v.str()));
    } catch (...) {
      return arg(a, 0, kw, "default", Value(0.0));
    }
  }
  return v.is_number() ? Value(v.as_float()) : arg(a, 0, kw, "default", Value(0.0));
}

Value absolute(FilterHost&, const Value& v, const Args&, const Kwargs&) {
  return v.kind() == Kind::kFloat ? Value(std::fabs(v.as_float())) : Value(static_cast<int64_t>(std::llabs(v.as_int())));
}

Value round_to(FilterHost&, const Value& v, const Args& a, const Kwargs& kw) {
  const int64_t p = arg(a, 0, kw, "precision", Value(int64_t{0})).as_int();
  const double m = std::pow(10.0, static_cast<double>(p));
  return Value(std::nearbyint(v.as_float() * m) / m);
}

Value default_value(FilterHost&, const Value& v, const Args& a, const Kwargs& kw) {
  const bool boolean = arg(a, 1, kw, "boolean", Value(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return arg(a, 0, kw, "default_value", Value(""));
  return v;
}

Value first(FilterHost&, const Value& v, const Args&, const Kwargs&) {
  const Value::Array items = items_of(v);
  return items.empty() ? Value() : items.front();
}

Value last(FilterHost&, const Value& v, const Args&, const Kwargs&) {
  const Value::Array items = items_of(v);
  return items.empty() ? Value() : items.back();
}

Value reverse(FilterHost&, const Value& v, const Args&, const Kwargs&) {
  if (v.is_string()) return Value(std::string(v.str().rbegin(), v.str().rend()));
  Value::Array items = items_of(v);
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value join(FilterHost& host, const Value& v, const Args& a, const Kwargs& kw) {
  const std::string sep = arg(a, 0, kw, "d", Value("")).to_string();
  const Value attr = arg(a, 1, kw, "attribute", Value());
  std::string out;
  const Value::Array items = items_of(v);
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? sep : "") + (attr.is_undefined() ? items[i] : host.item(items[i], attr)).to_string();
  return Value(out);
}

Value replace(FilterHost&, const Value& v, const Args& a, const Kwargs& kw) {
  return Value(replace_all(v.to_string(), arg(a, 0, kw, "old", Value("")).to_string(),
                           arg(a, 1, kw, "new", Value("")).to_string(),
                           arg(a, 2, kw, "count", Value(int64_t{-1})).as_int()));
}

Value tojson(FilterHost&, const Value& v, const Args& a, const Kwargs& kw) {
  const Value indent = arg(a, 0, kw, "indent", Value());
  return Value(v.to_json(indent.is_number() ? static_cast<int>(indent.as_int()) : -1));
}

Value indent(FilterHost&, const Value& v, const Args& a, const Kwargs& kw) {
  const Value w = arg(a, 0, kw, "width", Value(int64_t{4}));
  const std::string pad = w.is_string() ? w.str() : std::string(size_t(w.as_int()), ' ');
  const bool first_line = arg(a, 1, kw, "first", Value(false)).truthy();
  const bool blank = arg(a, 2, kw, "blank", Value(false)).truthy();
  std::string s = v.to_string(), out;
  size_t start = 0;
  for (bool is_first = true; start <= s.size(); is_first = false) {
    size_t nl = s.find('\n', start);
    const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((!is_first || first_line) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return Value(out);
}

Value sum(FilterHost&, const Value& v, const Args&, const Kwargs&) {
  Value total(int64_t{0});
  for (const Value& x : items_of(v))
    total = total.kind() == Kind::kFloat || x.kind() == Kind::kFloat ? Value(total.as_float() + x.as_float())
                                                                     : Value(total.as_int() + x.as_int());
  return total;
}

// The first item that no other item beats (`sign` -1: the least, 1: the greatest).
Value extreme(const Value& v, int sign) {
  const Value::Array items = items_of(v);
  if (items.empty()) return Value();
  Value best = items[0];
  for (const Value& x : items)
    if (compare(x, best) * sign > 0) best = x;
  return best;
}
Value min(FilterHost&, const Value& v, const Args&, const Kwargs&) { return extreme(v, -1); }
Value max(FilterHost&, const Value& v, const Args&, const Kwargs&) { return extreme(v, 1); }

Value unique(FilterHost&, const Value& v, const Args&, const Kwargs&) {
  Value::Array out;
  for (const Value& x : items_of(v))
    if (!contains(Value(out), x)) out.push_back(x);
  return Value(std::move(out));
}

Value sort(FilterHost& host, const Value& v, const Args& a, const Kwargs& kw) {
  Value::Array items = items_of(v);
  const bool descending = arg(a, 0, kw, "reverse", Value(false)).truthy();
  const Value attr = arg(a, 2, kw, "attribute", Value());
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = attr.is_undefined() ? x : host.item(x, attr), ky = attr.is_undefined() ? y : host.item(y, attr);
    return descending ? compare(kx, ky) > 0 : compare(kx, ky) < 0;
  });
  return Value(std::move(items));
}

Value map(FilterHost& host, const Value& v, const Args& a, const Kwargs& kw) {
  Value::Array out;
  const Value attr = arg(a, 99, kw, "attribute", Value());
  for (const Value& x : items_of(v)) {
    if (!attr.is_undefined())
      out.push_back(host.item(x, attr));
    else if (!a.empty())
      out.push_back(host.filter(a[0].to_string(), x, Args(a.begin() + 1, a.end()), {}));
    else
      out.push_back(x);
  }
  return Value(std::move(out));
}

// select / reject (a test on each item) and selectattr / rejectattr (a test
// on an attribute of each item); no test: truthiness.
Value keep_where(FilterHost& host, const Value& v, const Args& a, bool by_attr, bool keep) {
  Value::Array out;
  for (const Value& x : items_of(v)) {
    Value subject = by_attr ? host.item(x, a.empty() ? Value() : a[0]) : x;
    const size_t t = by_attr ? 1 : 0;
    const bool pass =
        a.size() > t ? host.test(a[t].to_string(), subject, Args(a.begin() + t + 1, a.end())) : subject.truthy();
    if (pass == keep) out.push_back(x);
  }
  return Value(std::move(out));
}

const std::unordered_map<std::string_view, Filter>& filters() {
  static const std::unordered_map<std::string_view, Filter> table = {
      {"trim", trim},
      {"upper", [](FilterHost&, const Value& v, const Args&, const Kwargs&) { return Value(upper(v.to_string())); }},
      {"lower", [](FilterHost&, const Value& v, const Args&, const Kwargs&) { return Value(lower(v.to_string())); }},
      {"capitalize",
       [](FilterHost&, const Value& v, const Args&, const Kwargs&) { return Value(capitalize(v.to_string())); }},
      {"title", [](FilterHost&, const Value& v, const Args&, const Kwargs&) { return Value(title(v.to_string())); }},
      {"length", [](FilterHost&, const Value& v, const Args&, const Kwargs&) { return Value(length_of(v)); }},
      {"count", [](FilterHost&, const Value& v, const Args&, const Kwargs&) { return Value(length_of(v)); }},
      {"string", [](FilterHost&, const Value& v, const Args&, const Kwargs&) { return Value(v.to_string()); }},
      {"safe", [](FilterHost&, const Value& v, const Args&, const Kwargs&) { return v; }},
      {"e", escape},
      {"escape", escape},
      {"int", to_int},
      {"float", to_float},
      {"abs", absolute},
      {"round", round_to},
      {"default", default_value},
      {"d", default_value},
      {"first", first},
      {"last", last},
      {"list", [](FilterHost&, const Value& v, const Args&, const Kwargs&) { return Value(items_of(v)); }},
      {"reverse", reverse},
      {"items",
       [](FilterHost& h, const Value& v, const Args&, const Kwargs&) { return h.attribute(v, "items").function()({}, {}); }},
      {"join", join},
      {"replace", replace},
      {"tojson", tojson},
      {"indent", indent},
      {"sum", sum},
      {"min", min},
      {"max", max},
      {"unique", unique},
      {"sort", sort},
      {"map", map},
      {"select", [](FilterHost& h, const Value& v, const Args& a, const Kwargs&) { return keep_where(h, v, a, false, true); }},
      {"reject", [](FilterHost& h, const Value& v, const Args& a, const Kwargs&) { return keep_where(h, v, a, false, false); }},
      {"selectattr",
       [](FilterHost& h, const Value& v, const Args& a, const Kwargs&) { return keep_where(h, v, a, true, true); }},
      {"rejectattr",
       [](FilterHost& h, const Value& v, const Args& a, const Kwargs&) { return keep_where(h, v, a, true, false); }},
      {"wordcount",
       [](FilterHost&, const Value& v, const Args&, const Kwargs&) {
         return Value(static_cast<int64_t>(split(v.to_string(), Value(), -1).array().size()));
       }},
  };
  return table;
}

}  // namespace

Value apply_filter(FilterHost& host, const std::string& name, const Value& v, const Args& a, const Kwargs& kw) {
  const auto it = filters().find(name);
  if (it == filters().end()) throw Error("unknown filter '" + name + "'");
  return it->second(host, v, a, kw);
}

}  // namespace layerstream::chat::jinja

// serve_render_template TEMPLATE CASES.json: renders a chat template with our
// Jinja engine for each case (an object of template variables) and prints a
// JSON array of {"ok": true, "text": ...} or {"ok": false, "error": ...}.
// chat_templates_test.py compares the results with Python's jinja2.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/serve/jinja.h"

using layerstream::serve::jinja::Value;
using json = nlohmann::ordered_json;  // keeps key order: templates may iterate dicts

namespace {

Value to_value(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return Value::none();
    case json::value_t::boolean:
      return Value(j.get<bool>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return Value(j.get<int64_t>());
    case json::value_t::number_float:
      return Value(j.get<double>());
    case json::value_t::string:
      return Value(j.get<std::string>());
    case json::value_t::array: {
      Value::Array a;
      for (const json& x : j) a.push_back(to_value(x));
      return Value(std::move(a));
    }
    case json::value_t::object: {
      Value::Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o[it.key()] = to_value(it.value());
      return Value(std::move(o));
    }
    default:
      return Value();
  }
}

std::string slurp(const char* path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: serve_render_template TEMPLATE CASES.json\n";
    return 2;
  }
  auto tmpl = layerstream::serve::jinja::Template::parse(slurp(argv[1]));
  json out = json::array();
  const json cases = json::parse(slurp(argv[2]));
  for (const auto& c : cases) {
    if (!tmpl.ok()) {
      out.push_back({{"ok", false}, {"error", tmpl.status().message()}});
      continue;
    }
    Value::Object vars = to_value(c).object();
    auto text = (*tmpl)->render(vars);
    if (text.ok())
      out.push_back({{"ok", true}, {"text", *text}});
    else
      out.push_back({{"ok", false}, {"error", text.status().message()}});
  }
  std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  return 0;
}

// serve_render_template TEMPLATE CASES.json: renders a chat template with our
// Jinja engine for each case (an object of template variables) and prints a
// JSON array of {"ok": true, "text": ...} or {"ok": false, "error": ...}.
// chat_templates_test.py compares the results with Python's jinja2.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/chat/jinja_json.h"

using layerstream::chat::jinja::Value;
using json = nlohmann::ordered_json;  // keeps key order: templates may iterate dicts

namespace {

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
  auto tmpl = layerstream::chat::jinja::Template::parse(slurp(argv[1]));
  json out = json::array();
  const json cases = json::parse(slurp(argv[2]));
  for (const auto& c : cases) {
    if (!tmpl.ok()) {
      out.push_back({{"ok", false}, {"error", tmpl.status().message()}});
      continue;
    }
    Value::Object vars = layerstream::chat::jinja::value_from_json(c).object();
    auto text = (*tmpl)->render(vars);
    if (text.ok())
      out.push_back({{"ok", true}, {"text", *text}});
    else
      out.push_back({{"ok", false}, {"error", text.status().message()}});
  }
  std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  return 0;
}

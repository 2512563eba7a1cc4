#include "runtime/chat/jinja_json.h"

namespace layerstream::chat::jinja {

Value value_from_json(const nlohmann::ordered_json& j) {
  using json = nlohmann::ordered_json;
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
      for (const json& x : j) a.push_back(value_from_json(x));
      return Value(std::move(a));
    }
    case json::value_t::object: {
      Value::Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o[it.key()] = value_from_json(it.value());
      return Value(std::move(o));
    }
    default:  // binary, discarded: nothing a template can show
      return Value();
  }
}

}  // namespace layerstream::chat::jinja

#include "runtime/grammar/json_schema_bounds.h"

#include <nlohmann/json.hpp>

namespace layerstream::grammar {
namespace {

using nlohmann::ordered_json;

// RFC 3339's full-time and date-time, as the engine writes them, with the
// fraction of a second bounded.
constexpr const char* kTime =
    "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
constexpr const char* kDate = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[1-2][0-9]|3[01])";

bool bound(ordered_json& j) {
  bool changed = false;
  if (j.is_array()) {
    for (ordered_json& v : j) changed |= bound(v);
    return changed;
  }
  if (!j.is_object()) return false;
  const auto format = j.find("format");
  if (format != j.end() && format->is_string() && !j.contains("pattern") &&
      (*format == "time" || *format == "date-time")) {
    j["pattern"] = std::string("^") + (*format == "time" ? "" : std::string(kDate) + "T") + kTime + "$";
    j.erase("format");
    changed = true;
  }
  for (auto& [key, v] : j.items()) changed |= bound(v);
  return changed;
}

}  // namespace

std::string bound_time_fractions(const std::string& schema) {
  ordered_json j = ordered_json::parse(schema, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !bound(j)) return schema;
  return j.dump();
}

}  // namespace layerstream::grammar

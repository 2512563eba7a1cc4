#include "runtime/grammar/json_formats.h"

#include <nlohmann/json.hpp>
#include <string_view>

namespace layerstream::grammar {
namespace {

using nlohmann::ordered_json;

// RFC 3339 full-date, full-time and date-time, and a dotted quad, as regular
// expressions (the engine's syntax: no \d).
constexpr std::string_view kYear = "([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})";
constexpr std::string_view kMonthDay =
    "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))";
constexpr std::string_view kTime =
    "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
constexpr std::string_view kOctet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";

// The pattern for `format`, or "" when the engine's own grammar is kept.
std::string pattern_of(std::string_view format) {
  const std::string date = std::string(kYear) + "-" + std::string(kMonthDay);
  if (format == "date") return "^" + date + "$";
  if (format == "time") return "^" + std::string(kTime) + "$";
  if (format == "date-time") return "^" + date + "T" + std::string(kTime) + "$";
  if (format == "ipv4") {
    const std::string o(kOctet);
    return "^" + o + "\\." + o + "\\." + o + "\\." + o + "$";
  }
  return "";
}

bool make_strict(ordered_json& j) {
  bool changed = false;
  if (j.is_array()) {
    for (ordered_json& v : j) changed |= make_strict(v);
    return changed;
  }
  if (!j.is_object()) return false;
  const auto format = j.find("format");
  if (format != j.end() && format->is_string() && !j.contains("pattern")) {
    const std::string pattern = pattern_of(format->get<std::string>());
    if (!pattern.empty()) {
      j["pattern"] = pattern;
      j.erase("format");
      changed = true;
    }
  }
  for (auto& [key, v] : j.items()) changed |= make_strict(v);
  return changed;
}

}  // namespace

std::string strict_formats(const std::string& schema) {
  ordered_json j = ordered_json::parse(schema, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !make_strict(j)) return schema;
  return j.dump();
}

}  // namespace layerstream::grammar

// bound_time_fractions: time and date-time strings get a pattern whose
// fraction of a second has at most 9 digits, wherever they sit in a schema;
// the pattern still takes every RFC 3339 time it should (checked with
// std::regex on real values) and nothing else changes.
#include "runtime/grammar/json_schema_bounds.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace layerstream::grammar {
namespace {

using nlohmann::json;

bool matches(const json& string_schema, const std::string& value) {
  return std::regex_match(value, std::regex(string_schema["pattern"].get<std::string>()));
}

TEST(JsonSchemaBounds, TimeFractionsAreBoundedWhereverTheyAre) {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"at", {{"type", "string"}, {"format", "date-time"}}},
        {"times", {{"type", "array"}, {"items", {{"type", "string"}, {"format", "time"}}}}},
        {"day", {{"type", "string"}, {"format", "date"}}},
        {"own", {{"type", "string"}, {"format", "time"}, {"pattern", "^12:00:00Z$"}}}}}};
  const json out = json::parse(bound_time_fractions(schema.dump()));
  const json& at = out["properties"]["at"];
  const json& time = out["properties"]["times"]["items"];
  EXPECT_FALSE(at.contains("format"));
  EXPECT_FALSE(time.contains("format"));
  EXPECT_TRUE(matches(at, "2024-02-29T23:59:60.123456789+05:30"));
  EXPECT_TRUE(matches(at, "2024-01-10T12:30:00Z"));
  EXPECT_FALSE(matches(at, "2024-01-10T12:30:00.1234567890Z"));  // a 10th digit
  EXPECT_FALSE(matches(at, "2024-13-10T12:30:00Z"));
  EXPECT_TRUE(matches(time, "10:10:10.5Z"));
  EXPECT_FALSE(matches(time, "10:10:10.10101010101Z"));
  EXPECT_FALSE(matches(time, "24:00:00Z"));
  // Other formats, and a string with its own pattern, stay as they are.
  EXPECT_EQ(out["properties"]["day"], schema["properties"]["day"]);
  EXPECT_EQ(out["properties"]["own"], schema["properties"]["own"]);
}

TEST(JsonSchemaBounds, OtherTextIsLeftAlone) {
  EXPECT_EQ(bound_time_fractions(R"({"type": "integer"})"), R"({"type": "integer"})");
  EXPECT_EQ(bound_time_fractions("{not json"), "{not json");
}

}  // namespace
}  // namespace layerstream::grammar

// strict_formats: date, time, date-time and ipv4 strings get patterns that
// take what RFC 3339 and Python's readers take (checked with std::regex on
// real values) and refuse what they refuse or what never ends, wherever the
// string sits in a schema; nothing else changes.
#include "runtime/grammar/json_formats.h"

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

TEST(JsonFormats, TimesDatesAndAddressesBecomeStrictPatterns) {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"at", {{"type", "string"}, {"format", "date-time"}}},
        {"times", {{"type", "array"}, {"items", {{"type", "string"}, {"format", "time"}}}}},
        {"day", {{"type", "string"}, {"format", "date"}}},
        {"ip", {{"type", "string"}, {"format", "ipv4"}}},
        {"mail", {{"type", "string"}, {"format", "email"}}},
        {"own", {{"type", "string"}, {"format", "time"}, {"pattern", "^12:00:00Z$"}}}}}};
  const json out = json::parse(strict_formats(schema.dump()));
  const json& p = out["properties"];
  for (const char* key : {"at", "day", "ip"}) EXPECT_FALSE(p[key].contains("format")) << key;
  EXPECT_FALSE(p["times"]["items"].contains("format"));
  const json& time = p["times"]["items"];

  EXPECT_TRUE(matches(p["at"], "2024-12-31T23:59:60.123456789+05:30"));
  EXPECT_TRUE(matches(p["at"], "0001-01-10T12:30:00Z"));
  EXPECT_FALSE(matches(p["at"], "2024-01-10T12:30:00.1234567890Z"));  // a 10th digit
  EXPECT_FALSE(matches(p["at"], "2024-13-10T12:30:00Z"));
  EXPECT_TRUE(matches(time, "10:10:10.5Z"));
  EXPECT_FALSE(matches(time, "10:10:10.10101010101Z"));
  EXPECT_FALSE(matches(time, "24:00:00Z"));
  EXPECT_TRUE(matches(p["day"], "2023-04-30"));
  EXPECT_TRUE(matches(p["day"], "1999-02-28"));
  EXPECT_FALSE(matches(p["day"], "0000-01-01"));  // no year 0 in Python's datetime
  EXPECT_FALSE(matches(p["day"], "2023-04-31"));
  EXPECT_FALSE(matches(p["day"], "2023-02-30"));
  EXPECT_TRUE(matches(p["ip"], "192.168.0.1"));
  EXPECT_TRUE(matches(p["ip"], "255.0.10.9"));
  EXPECT_FALSE(matches(p["ip"], "100.000.000.000"));  // leading zeros
  EXPECT_FALSE(matches(p["ip"], "256.1.1.1"));
  // Other formats, and a string with its own pattern, stay as they are.
  EXPECT_EQ(p["mail"], schema["properties"]["mail"]);
  EXPECT_EQ(p["own"], schema["properties"]["own"]);
}

TEST(JsonFormats, OtherTextIsLeftAlone) {
  EXPECT_EQ(strict_formats(R"({"type": "integer"})"), R"({"type": "integer"})");
  EXPECT_EQ(strict_formats("{not json"), "{not json");
}

}  // namespace
}  // namespace layerstream::grammar

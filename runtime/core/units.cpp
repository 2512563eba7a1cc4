#include "layerstream/units.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace layerstream {

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

Result<uint64_t> parse_size(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("invalid size '" + std::string(text) + "': " + std::string(why) +
                                   " (examples: 4096, 512MiB, 6GiB, 1.5G)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string number(text.substr(0, i));
  if (number.empty()) return bad("no number");
  if (std::count(number.begin(), number.end(), '.') > 1) return bad("malformed number");
  std::string suffix = lower(text.substr(i));
  while (!suffix.empty() && suffix.front() == ' ') suffix.erase(suffix.begin());
  double mult = 1;
  if (suffix.empty() || suffix == "b") mult = 1;
  else if (suffix == "k" || suffix == "kib") mult = 1024.0;
  else if (suffix == "m" || suffix == "mib") mult = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "gib") mult = 1024.0 * 1024 * 1024;
  else if (suffix == "t" || suffix == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (suffix == "kb") mult = 1e3;
  else if (suffix == "mb") mult = 1e6;
  else if (suffix == "gb") mult = 1e9;
  else if (suffix == "tb") mult = 1e12;
  else return bad("unknown suffix '" + suffix + "'");
  double value = std::strtod(number.c_str(), nullptr) * mult;
  if (!std::isfinite(value) || value >= 18446744073709551615.0) return bad("too large");
  return static_cast<uint64_t>(std::llround(value));
}

std::string format_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

}  // namespace layerstream

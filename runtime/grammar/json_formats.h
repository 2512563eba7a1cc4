// String formats of a JSON schema made as strict as their common readers:
// the engine's format grammars (xgrammar) accept text that RFC 3339 and the
// validators clients use (Python's datetime and ipaddress, as jsonschema
// checks formats) refuse or that never ends:
//   - "time", "date-time": the fraction of a second is unbounded (`\.\d+`),
//     and a small model at temperature 0 writes digits until max_tokens;
//     here at most 9 digits (nanoseconds);
//   - "date", "date-time": year 0000 and days a month lacks (02-31); here
//     years 0001-9999 and days every year has (February to the 28th);
//   - "ipv4": leading zeros ("010"), which Python refuses as ambiguous.
// Each such string schema (without a "pattern" of its own) gets the format
// as a pattern instead; everything else is left as it is.
#pragma once

#include <string>

namespace layerstream::grammar {

// `schema` (JSON text) with those formats as patterns; text that is not
// JSON is returned as it is, for the engine to refuse.
std::string strict_formats(const std::string& schema);

}  // namespace layerstream::grammar

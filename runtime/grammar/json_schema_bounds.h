// Bounds on what a JSON schema leaves unbounded where a small model at
// temperature 0 loops: the fraction of a second of "format": "time" and
// "date-time" strings, which the engine's format grammar lets run on
// forever (`(\.\d+)?`), becomes at most 9 digits (nanoseconds, more than
// any clock gives). Everything else is left as it is.
#pragma once

#include <string>

namespace layerstream::grammar {

// `schema` (JSON text) with every string schema whose "format" is "time" or
// "date-time" (and that has no "pattern") given the RFC 3339 pattern of
// that format with a bounded fraction instead; text that is not JSON is
// returned as it is, for the engine to refuse.
std::string bound_time_fractions(const std::string& schema);

}  // namespace layerstream::grammar

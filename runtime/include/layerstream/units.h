// Byte sizes as people write them: "512MiB", "6GiB", "1.5G", "4096".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "layerstream/status.h"

namespace layerstream {

// Parses a size with an optional suffix: B, K/KB/KiB, M/MB/MiB, G/GB/GiB,
// T/TB/TiB (case-insensitive). K, M, G, T and the *iB forms are powers of
// 1024; KB, MB, GB, TB are powers of 1000. Fractions are allowed ("1.5GiB").
// Errors: InvalidArgument naming the text for empty input, junk, negative
// numbers, or a value that overflows 64 bits.
Result<uint64_t> parse_size(std::string_view text);

// "1.50 GiB", "512.00 MiB", "4096 B".
std::string format_bytes(uint64_t bytes);

}  // namespace layerstream

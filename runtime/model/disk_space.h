// Free-space check before writing a large file, so a write that cannot
// finish is refused up front with the numbers instead of failing midway.
#pragma once

#include <cstdint>
#include <string>

#include "layerstream/status.h"

namespace layerstream {

// OutOfBudget naming `what`, the bytes needed and the free bytes of the
// filesystem that will hold `path`, when `bytes` do not fit. OK when they do,
// or when the free space cannot be read (the write itself will then report).
Status check_free_disk(const std::string& path, uint64_t bytes, const std::string& what);

}  // namespace layerstream

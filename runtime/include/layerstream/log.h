// Logging controls. The library logs through spdlog to stderr, never to stdout
// (stdout belongs to the app: generated text, tables).
#pragma once

#include <string_view>

#include "layerstream/status.h"

namespace layerstream {

// Sets the library's log level: trace, debug, info, warn, error, critical, off.
// Thread-safe. Returns InvalidArgument for an unknown name.
Status set_log_level(std::string_view level);

}  // namespace layerstream

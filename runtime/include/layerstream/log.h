// Logging controls. The library logs through spdlog to stderr, never to stdout
// (stdout belongs to the app: generated text, tables); an app can route the
// lines to its own logger instead.
#pragma once

#include <functional>
#include <string_view>

#include "layerstream/status.h"

namespace layerstream {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical };

// Receives one log line (without a trailing newline). Called on whichever
// library thread logs, one call at a time; it must not call back into the
// library.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Sets the library's log level: trace, debug, info, warn, error, critical, off.
// Thread-safe. Returns InvalidArgument for an unknown name.
Status set_log_level(std::string_view level);

// Routes the library's log lines at or above the log level to `sink`
// instead of stderr; an empty sink restores stderr. Thread-safe.
void set_log_sink(LogSink sink);

}  // namespace layerstream

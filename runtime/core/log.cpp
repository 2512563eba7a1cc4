#include "runtime/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <string>

#include "layerstream/log.h"

namespace layerstream {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto l = std::make_shared<spdlog::logger>("layerstream", sink);
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    l->set_level(spdlog::level::info);
    return l;
  }();
  return *instance;
}

Status set_log_level(std::string_view level) {
  auto lvl = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (lvl == spdlog::level::off && level != "off") {
    return Status::InvalidArgument("unknown log level '" + std::string(level) +
                                   "' (expected trace, debug, info, warn, error, critical or off)");
  }
  logger().set_level(lvl);
  return Status::OK();
}

}  // namespace layerstream

// Internal logging: one spdlog logger named "layerstream" writing to stderr.
// Use LS_LOG_INFO("... {}", x) etc.; formatting follows fmt syntax.
#pragma once

#include <spdlog/spdlog.h>

namespace layerstream {

// The library's logger (created on first use; thread-safe).
spdlog::logger& logger();

}  // namespace layerstream

#define LS_LOG_TRACE(...) ::layerstream::logger().trace(__VA_ARGS__)
#define LS_LOG_DEBUG(...) ::layerstream::logger().debug(__VA_ARGS__)
#define LS_LOG_INFO(...) ::layerstream::logger().info(__VA_ARGS__)
#define LS_LOG_WARN(...) ::layerstream::logger().warn(__VA_ARGS__)
#define LS_LOG_ERROR(...) ::layerstream::logger().error(__VA_ARGS__)

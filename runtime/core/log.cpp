#include "runtime/core/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>
#include <string>

#include "layerstream/log.h"

namespace layerstream {
namespace {

constexpr const char* kPattern = "[%H:%M:%S.%e] [%^%l%$] %v";

LogLevel level_of(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace: return LogLevel::kTrace;
    case spdlog::level::debug: return LogLevel::kDebug;
    case spdlog::level::info: return LogLevel::kInfo;
    case spdlog::level::warn: return LogLevel::kWarn;
    case spdlog::level::err: return LogLevel::kError;
    default: return LogLevel::kCritical;
  }
}

// The logger's one sink: the app's LogSink when set, stderr otherwise. The
// app's sink is swapped under the sink's own lock, so a line is never
// delivered to a sink being replaced.
class RoutingSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  RoutingSink() : stderr_(std::make_shared<spdlog::sinks::stderr_color_sink_st>()) { stderr_->set_pattern(kPattern); }
  void set_app_sink(LogSink sink) {
    std::lock_guard<std::mutex> lock(mutex_);
    app_ = std::move(sink);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!app_) return stderr_->log(msg);
    app_(level_of(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override { stderr_->flush(); }

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_st> stderr_;
  LogSink app_;
};

std::shared_ptr<spdlog::logger> make_logger() {
  auto l = std::make_shared<spdlog::logger>("layerstream", std::make_shared<RoutingSink>());
  l->set_level(spdlog::level::info);
  return l;
}

}  // namespace

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

namespace {
RoutingSink& routing_sink() { return static_cast<RoutingSink&>(*logger().sinks().front()); }
}  // namespace

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

void set_log_sink(LogSink sink) { routing_sink().set_app_sink(std::move(sink)); }

}  // namespace layerstream

#include "examples/cli/cli_common.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "layerstream/log.h"
#include "layerstream/units.h"

namespace layerstream::cli {

namespace {
bool g_log_level_given = false;
}  // namespace

void set_log_level_given(bool given) { g_log_level_given = given; }
bool log_level_given() { return g_log_level_given; }

QuietLogsWhileGenerating::QuietLogsWhileGenerating() : active_(!g_log_level_given) {
  if (active_) (void)set_log_level("warn");
}
QuietLogsWhileGenerating::~QuietLogsWhileGenerating() {
  if (active_) (void)set_log_level("info");
}

std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}

void DeviceFlags::add_to(CLI::App& sub) {
  sub.add_option("--backend", backend, "auto, host or cuda")->capture_default_str();
  sub.add_option("--sim-link", sim_link_gbps, "Host backend: throttle H2D copies to GBPS (0 = off)");
  sub.add_option("--host-threads", host_threads, "Host backend compute threads (0 = all cores)");
  sub.add_option("--staging", staging,
                 "auto: disk reads go straight into device memory when the CPU can address it (host backend); "
                 "always: device memory only copies reach, disk reads go through pinned staging buffers (the GPU path)")
      ->capture_default_str();
}

Result<DeviceOptions> DeviceFlags::options() const {
  auto be = parse_backend(backend);
  if (!be.ok()) return be.status().WithContext("--backend");
  if (sim_link_gbps < 0) return Status::InvalidArgument("--sim-link must be >= 0");
  DeviceOptions o;
  o.backend = *be;
  o.sim_link_gbps = sim_link_gbps;
  o.host_threads = host_threads;
  if (staging != "auto" && staging != "always")
    return Status::InvalidArgument("--staging: expected auto or always, got '" + staging + "'");
  o.copies_only = staging == "always";
  return o;
}

int fail(const Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  return kExitError;
}

int usage_error(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return kExitUsage;
}

Result<uint64_t> parse_size_flag(const std::string& flag, const std::string& text) {
  Result<uint64_t> r = parse_size(text);
  if (!r.ok()) return r.status().WithContext(flag);
  return r;
}

Status write_json_file(const std::string& path, const nlohmann::json& value) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return Status::FromErrno("cannot create " + tmp, errno);
    f << value.dump(2) << "\n";
    f.flush();
    if (!f) return Status::FromErrno("cannot write " + tmp, errno);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IOError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::OK();
}

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

}  // namespace layerstream::cli

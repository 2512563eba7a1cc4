#include "examples/cli/cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "layerstream/chat.h"
#include "layerstream/log.h"
#include "layerstream/units.h"
#include "runtime/core/status_macros.h"

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

CLI::Option* add_model_arg(CLI::App& sub, std::string& path, const std::string& help) {
  return sub.add_option("model", path, help);
}

void add_model_or_shape_args(CLI::App& sub, std::string& model, std::string& shape, const std::string& use) {
  add_model_arg(sub, model, "GGUF model file (or --shape)");
  sub.add_option("--shape", shape,
                 "With --box: " + use + " a model described by its shape, no file (llama-70b-q4_k_m, or "
                 "layers=80,hidden=8192,ffn=28672,heads=64,kv_heads=8,vocab=128256,dtype=q4_k_m)");
}

void add_json_flag(CLI::App& sub, std::string& path, const std::string& help) { sub.add_option("--json", path, help); }

void add_kv_type_flag(CLI::App& sub, std::string& kv_type) {
  sub.add_option("--kv-type", kv_type, "KV cache type: f32 or f16")->capture_default_str();
}

void add_io_flag(CLI::App& sub, std::string& io) {
  sub.add_option("--io", io, "Disk reads: auto, uring, pread, buffered")->capture_default_str();
}

void add_exact_flag(CLI::App& sub, bool& exact) {
  sub.add_flag("--exact", exact, "Host backend: f32-activation matmuls (default: int8 activations, faster)");
}

void add_chat_template_option(CLI::App& sub, std::string& spec) {
  std::string names;
  for (const std::string& n : ChatTemplate::builtin_names()) names += (names.empty() ? "" : ", ") + n;
  sub.add_option(
      "--chat-template", spec,
      "Chat template instead of the model file's: a built-in name (" + names + ") or a Jinja file");
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
  auto be = backend_from_name(backend);
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

namespace {
// A parsed flag value, or its error with the flag's name in front.
template <class T>
Result<T> named(const char* flag, Result<T> value) {
  if (!value.ok()) return value.status().WithContext(flag);
  return value;
}
}  // namespace

void ModelFlags::add_to(CLI::App& sub, const std::string& ctx_help) {
  sub.add_option("--vram", vram, "Device memory budget (e.g. 2GiB; default: cuda 90% of free memory, host what "
                                 "the whole model needs, capped at 90% of free RAM)");
  sub.add_option("--ram", ram, "Pinned RAM budget for RAM-tier layers (default 0: stream from disk)");
  sub.add_option("--backend", backend, "auto, host or cuda")->capture_default_str();
  sub.add_option("--sim-link", options.sim_link_gbps, "Host backend: throttle H2D copies to GB/s (0 = off)");
  add_io_flag(sub, io);
  sub.add_option("--staging", staging,
                 "auto, or always: device memory only copies reach, disk reads through pinned staging buffers "
                 "(the GPU path, on the host backend)")
      ->capture_default_str();
  sub.add_option("--ctx", options.context, ctx_help);
  sub.add_option("--host-threads", options.host_threads, "Host backend compute threads (0 = all cores)");
  sub.add_option("--host-factor", options.host_compute_factor,
                 "Hybrid execution: override a block's host compute time before measurement, as a multiple of "
                 "its device time (0 = predicted: equal on the host backend, unknown on a GPU until measured)");
  add_exact_flag(sub, options.exact);
  add_kv_type_flag(sub, kv_type);
  sub.add_option("--strategy", strategy,
                 "resident, serial, overlap, planned or host (planned also chooses each block's site: device, "
                 "host or split)")
      ->capture_default_str();
}

Status ModelFlags::resolve() {
  if (!vram.empty()) {
    LS_ASSIGN_OR_RETURN(options.vram_budget, parse_size_flag("--vram", vram));
  }
  if (!ram.empty()) {
    LS_ASSIGN_OR_RETURN(options.ram_budget, parse_size_flag("--ram", ram));
  }
  if (options.sim_link_gbps < 0) return Status::InvalidArgument("--sim-link must be >= 0 (0 = off)");
  if (options.host_threads < 0) return Status::InvalidArgument("--host-threads must be >= 0 (0 = all cores)");
  if (options.host_compute_factor < 0) return Status::InvalidArgument("--host-factor must be >= 0");
  if (options.context < 0) return Status::InvalidArgument("--ctx must be >= 0 (0: min(model, 2048))");
  LS_ASSIGN_OR_RETURN(options.backend, named("--backend", backend_from_name(backend)));
  LS_ASSIGN_OR_RETURN(options.io, named("--io", io_path_from_name(io)));
  LS_ASSIGN_OR_RETURN(options.staging, named("--staging", staging_from_name(staging)));
  LS_ASSIGN_OR_RETURN(options.kv_type, named("--kv-type", kv_type_from_name(kv_type)));
  LS_ASSIGN_OR_RETURN(options.strategy, named("--strategy", strategy_from_name(strategy)));
  return Status::OK();
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

std::string format_seconds(double s) {
  const long t = std::lround(std::max(0.0, s));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

}  // namespace layerstream::cli

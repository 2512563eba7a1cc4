// Conventions shared by every `layerstream` subcommand:
//  - stdout is for people (tables, generated text); `--json FILE` writes the
//    machine-readable result to FILE;
//  - errors go to stderr as "error: ..." with exit code 1; usage errors exit 2;
//  - sizes accept B/KiB/MiB/GiB/TiB suffixes (layerstream/units.h).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layerstream/options.h"
#include "layerstream/status.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/device.h"

namespace layerstream::cli {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// One subcommand. setup() declares its options on `sub`; run() executes after
// parsing and returns the process exit code.
class Command {
 public:
  virtual ~Command() = default;
  virtual void setup(CLI::App& sub) = 0;
  virtual int run() = 0;
};

struct CommandSpec {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Command>()> make;
};

// The registry filled by LS_REGISTER_COMMAND at static-initialisation time.
std::vector<CommandSpec>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description, std::function<std::unique_ptr<Command>()> make) {
    command_registry().push_back({std::move(name), std::move(description), std::move(make)});
  }
};

// Flags several commands take, each declared in one place so that its name
// and help read the same in every command.
// The positional model file; `help` says what may stand in for it.
CLI::Option* add_model_arg(CLI::App& sub, std::string& path, const std::string& help = "GGUF model file");
// The model file, or --shape: a model described by its shape, no file
// (with --box); `use` is what the command does with it ("predict for").
void add_model_or_shape_args(CLI::App& sub, std::string& model, std::string& shape, const std::string& use);
// --json FILE: where the machine-readable result goes.
void add_json_flag(CLI::App& sub, std::string& path, const std::string& help = "Write the result as JSON to FILE");
// --kv-type f32|f16.
void add_kv_type_flag(CLI::App& sub, std::string& kv_type);
// --io auto|uring|pread|buffered: the disk read path.
void add_io_flag(CLI::App& sub, std::string& io);
// --exact: f32-activation matmuls on the host backend.
void add_exact_flag(CLI::App& sub, bool& exact);
// --chat-template NAME|FILE: a built-in chat template or a Jinja file instead of the model file's.
void add_chat_template_option(CLI::App& sub, std::string& spec);

// The device flags shared by commands that open a device directly (probe,
// bench): --backend, --sim-link, --host-threads.
struct DeviceFlags {
  std::string backend = "auto";
  double sim_link_gbps = 0;
  int host_threads = 0;
  std::string staging = "auto";  // auto | always (host backend: device memory only copies reach)
  void add_to(CLI::App& sub);
  // The DeviceOptions they ask for; InvalidArgument naming the flag otherwise.
  Result<DeviceOptions> options() const;
};

// The flags of every command that opens a model (run, serve): budgets,
// backend, link throttle, disk path, staging, context, host threads, sites,
// KV type and strategy, each under one name and one help text. The numeric
// ones are bound straight to `options`; resolve() parses the rest into it.
struct ModelFlags {
  ModelOptions options;
  std::string vram, ram, backend = "auto", io = "auto", staging = "auto", kv_type = "f32", strategy = "planned";
  // `ctx_help`: what a position is to this command.
  void add_to(CLI::App& sub, const std::string& ctx_help = "Positions per sequence (0: min(model, 2048))");
  // Fills options' budgets and enums; InvalidArgument naming the flag otherwise.
  Status resolve();
};

// Prints "error: <message>" to stderr and returns kExitError.
int fail(const Status& status);
// Prints "error: <message>" to stderr and returns kExitUsage.
int usage_error(const std::string& message);

// Parses a size flag ("--vram 2GiB"); the error names the flag.
Result<uint64_t> parse_size_flag(const std::string& flag, const std::string& text);

// Writes JSON to `path` atomically (temporary file, then rename), pretty-printed.
Status write_json_file(const std::string& path, const nlohmann::json& value);

// True when stderr is a terminal (progress bars are drawn only then).
bool stderr_is_tty();

// "H:MM:SS" for a duration in seconds (progress ETAs); negative as 0.
std::string format_seconds(double seconds);

// Whether the user chose --log-level (main sets it after parsing).
void set_log_level_given(bool given);
bool log_level_given();

// While alive, and unless the user chose a log level, the library logs only
// warnings and errors: for commands whose stdout is text being produced
// (generated tokens), so that no info line lands inside it.
class QuietLogsWhileGenerating {
 public:
  QuietLogsWhileGenerating();
  ~QuietLogsWhileGenerating();
  QuietLogsWhileGenerating(const QuietLogsWhileGenerating&) = delete;
  QuietLogsWhileGenerating& operator=(const QuietLogsWhileGenerating&) = delete;

 private:
  bool active_;
};

}  // namespace layerstream::cli

#define LS_REGISTER_COMMAND(CLASS, NAME, DESCRIPTION)                           \
  static ::layerstream::cli::CommandRegistrar LS_CONCAT(_ls_cmd_, __LINE__)(   \
      NAME, DESCRIPTION, [] { return std::unique_ptr<::layerstream::cli::Command>(new CLASS()); })

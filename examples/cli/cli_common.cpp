#include "examples/cli/cli_common.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "layerstream/units.h"

namespace layerstream::cli {

std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
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

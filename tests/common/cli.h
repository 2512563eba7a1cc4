// Running the `layerstream` CLI as a subprocess from the CLI test suites.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace layerstream::testing {

// Where a subprocess's stderr goes.
enum class CliStderr {
  kSeparate,  // captured on its own into CliResult::err
  kMerged,    // sent to stdout (2>&1), so CliResult::out holds both as written
};

struct CliResult {
  int exit_code = -1;  // the exit status; -1 when the command did not start or did not exit normally
  std::string out;     // stdout (with CliStderr::kMerged, stdout and stderr)
  std::string err;     // stderr (empty with CliStderr::kMerged)
};

// Runs `program args` through /bin/sh and waits for it. `args` is shell text
// (split into words by the shell; nothing is quoted here).
CliResult run_command(const std::string& program, const std::string& args,
                      CliStderr stderr_mode = CliStderr::kSeparate);

#ifdef LAYERSTREAM_CLI_PATH
// run_command on the layerstream CLI built with this suite (suites declared
// with layerstream_add_cli_test get LAYERSTREAM_CLI_PATH).
inline CliResult run_cli(const std::string& args, CliStderr stderr_mode = CliStderr::kSeparate) {
  return run_command(LAYERSTREAM_CLI_PATH, args, stderr_mode);
}

// `layerstream example-model PATH FLAGS` wrote a model at `path`; a failure
// carries the command's output.
inline ::testing::AssertionResult cli_example_model(const std::string& path, const std::string& flags) {
  const CliResult r = run_cli("example-model " + path + " " + flags);
  if (r.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "example-model " << path << " " << flags << ": exit " << r.exit_code << "\n"
                                       << r.out << r.err;
}
#endif

}  // namespace layerstream::testing

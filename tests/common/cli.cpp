#include "tests/common/cli.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "tests/common/testing.h"

namespace layerstream::testing {

CliResult run_command(const std::string& program, const std::string& args, CliStderr stderr_mode) {
  CliResult r;
  TempDir dir;  // holds the captured stderr; removed on return
  const std::string err_path = dir.file("stderr.txt");
  const std::string redirect = stderr_mode == CliStderr::kMerged ? " 2>&1" : " 2>" + err_path;
  const std::string cmd = program + " " + args + redirect;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (stderr_mode == CliStderr::kSeparate) {
    std::ifstream f(err_path);
    r.err.assign(std::istreambuf_iterator<char>(f), {});
  }
  return r;
}

}  // namespace layerstream::testing

// End-to-end faults through the `layerstream` command, run as a subprocess:
// SIGINT while `example-model` writes (clean exit with a message, non-zero
// code, no file under the final name and no .tmp left behind) and, once the
// command exists, while `run` streams. Every wait has a deadline: a hang is
// a failure (and the child is killed), not a stuck ctest.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/testing.h"

extern char** environ;

namespace layerstream {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A child process with stdout/stderr redirected to files in `dir`.
class Child {
 public:
  Child(const std::vector<std::string>& args, const fs::path& dir)
      : out_path_(dir / "stdout.txt"), err_path_(dir / "stderr.txt") {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  pid_t pid() const { return pid_; }
  bool running() {
    if (reaped_) return false;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      reaped_ = true;
      status_ = st;
      return false;
    }
    return true;
  }
  // Waits up to `limit`; false on timeout (the child is then killed).
  bool wait_for(std::chrono::seconds limit) {
    const auto end = Clock::now() + limit;
    while (running()) {
      if (Clock::now() > end) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status_, 0);
        reaped_ = true;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  int raw_status() const { return status_; }
  std::string err() const { return slurp(err_path_); }
  std::string out() const { return slurp(out_path_); }

 private:
  static std::string slurp(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  fs::path out_path_, err_path_;
};

// Polls `pred` until it holds or `limit` passes.
template <typename Pred>
bool eventually(Pred pred, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

uint64_t size_or_zero(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

// SIGINT while example-model is writing: exit code 1 with "interrupted" on
// stderr, neither OUT nor OUT.tmp exists afterwards.
TEST(CliFaults, SigintDuringExampleModelLeavesNoFile) {
  testing::TempDir work, logs;
  const fs::path out = work.path() / "model.gguf";
  const fs::path tmp = work.path() / "model.gguf.tmp";
  // Big enough that it is still writing when the signal comes (4 GiB of
  // f32 at one thread), small enough to finish in minutes if the signal is
  // ignored (the test then fails on its deadline).
  Child child({LAYERSTREAM_CLI_PATH, "--log-level", "warn", "example-model", out.string(), "--size", "4GiB",
               "--dtype", "f32", "--threads", "1"},
              logs.path());
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(eventually([&] { return size_or_zero(tmp) > 0 || !child.running(); }, std::chrono::seconds(60)))
      << "example-model never started writing";
  ASSERT_TRUE(child.running()) << "example-model finished before the signal: " << child.err();
  ASSERT_EQ(::kill(child.pid(), SIGINT), 0);
  ASSERT_TRUE(child.wait_for(std::chrono::seconds(60))) << "example-model did not exit after SIGINT";
  const int st = child.raw_status();
  ASSERT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  EXPECT_NE(WEXITSTATUS(st), 0);
  const std::string err = child.err();
  EXPECT_NE(err.find("interrupted"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_TRUE(files_in(work.path()).empty());
}

// Without a signal the same command (small) leaves exactly the final file:
// the checks above are not vacuous.
TEST(CliFaults, ExampleModelWithoutSignalLeavesOnlyTheFinalFile) {
  testing::TempDir work, logs;
  const fs::path out = work.path() / "model.gguf";
  Child child({LAYERSTREAM_CLI_PATH, "--log-level", "warn", "example-model", out.string(), "--layers", "2",
               "--hidden", "64", "--ffn", "96", "--heads", "4", "--kv-heads", "2", "--vocab", "512"},
              logs.path());
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(child.wait_for(std::chrono::seconds(60)));
  ASSERT_TRUE(WIFEXITED(child.raw_status()));
  EXPECT_EQ(WEXITSTATUS(child.raw_status()), 0) << child.err();
  EXPECT_EQ(files_in(work.path()), std::vector<std::string>{"model.gguf"});
}

}  // namespace
}  // namespace layerstream

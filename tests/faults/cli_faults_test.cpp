// End-to-end faults through the `layerstream` command, run as a subprocess:
// SIGINT while `example-model` writes (clean exit with a message, non-zero
// code, no file under the final name and no .tmp left behind); SIGINT, a
// truncated model file and a too-small budget while `run` streams layers
// from disk. Every wait has a deadline: a hang is a failure (and the child
// is killed), not a stuck ctest.
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

// A model whose layers stream from disk on every pass of `run`: 4 blocks of
// ~1.6 MiB (f16) with a VRAM budget that holds a few of them plus the KV
// cache, and a context long enough that generation runs for many seconds.
class RunFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = (work_.path() / "model.gguf").string();
    Child gen({LAYERSTREAM_CLI_PATH, "--log-level", "warn", "example-model", model_, "--layers", "4", "--hidden",
               "256", "--ffn", "704", "--heads", "4", "--kv-heads", "2", "--vocab", "512", "--ctx", "4096"},
              logs_.path());
    ASSERT_TRUE(gen.wait_for(std::chrono::seconds(120)));
    ASSERT_EQ(gen.raw_status(), 0) << gen.err();
  }
  std::vector<std::string> run_args(const std::string& vram) const {
    return {LAYERSTREAM_CLI_PATH, "run", model_, "--backend", "host", "--vram", vram, "--ctx", "4096",
            "--kv-type", "f16", "-n", "4000", "--temp", "0", "-p", "Once upon a time", "--json",
            (work_.path() / "result.json").string()};
  }
  // Waits until the child has printed generated text after the prompt.
  static bool generating(Child& c) {
    return eventually([&] { return c.out().size() > 40 || !c.running(); }, std::chrono::seconds(120)) &&
           c.running();
  }
  testing::TempDir work_, logs_;
  std::string model_;
};

// SIGINT while `run` generates: exit code 1, "interrupted" on stderr, within
// seconds, and no --json result written.
TEST_F(RunFaults, SigintDuringRunExitsCleanly) {
  Child child(run_args("15MiB"), logs_.path());
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(generating(child)) << "run did not start generating: " << child.err();
  ASSERT_EQ(::kill(child.pid(), SIGINT), 0);
  ASSERT_TRUE(child.wait_for(std::chrono::seconds(60))) << "run did not exit after SIGINT";
  const int st = child.raw_status();
  ASSERT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  EXPECT_EQ(WEXITSTATUS(st), 1);
  EXPECT_NE(child.err().find("interrupted"), std::string::npos) << child.err();
  EXPECT_FALSE(fs::exists(work_.path() / "result.json"));
}

// The model file truncated while `run` streams it: exit code 1 with an error
// naming the file, within seconds (no hang, no crash).
TEST_F(RunFaults, ModelTruncatedDuringRunIsAClearError) {
  Child child(run_args("15MiB"), logs_.path());
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(generating(child)) << "run did not start generating: " << child.err();
  const uint64_t size = fs::file_size(model_);
  fs::resize_file(model_, size / 2);
  ASSERT_TRUE(child.wait_for(std::chrono::seconds(60))) << "run did not stop after the truncation";
  const int st = child.raw_status();
  ASSERT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  EXPECT_EQ(WEXITSTATUS(st), 1) << child.err();
  const std::string err = child.err();
  EXPECT_NE(err.find("error:"), std::string::npos) << err;
  EXPECT_NE(err.find(model_), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(work_.path() / "result.json"));
}

// A VRAM budget below one window plus the KV cache: exit code 1 with
// OutOfBudget's bytes needed and available, before any token is generated.
TEST_F(RunFaults, BudgetBelowThePlanFailsBeforeRunning) {
  Child child(run_args("1MiB"), logs_.path());
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(child.wait_for(std::chrono::seconds(60)));
  const int st = child.raw_status();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1) << child.err();
  const std::string err = child.err();
  EXPECT_NE(err.find("budget"), std::string::npos) << err;
  EXPECT_NE(err.find("1048576"), std::string::npos) << err;  // the budget, in bytes
  EXPECT_EQ(child.out().find("Once upon a time"), std::string::npos) << child.out();
  EXPECT_FALSE(fs::exists(work_.path() / "result.json"));
}

}  // namespace
}  // namespace layerstream

// End-to-end faults while the executor streams file-backed layers from disk
// on the host backend: the model file truncated or rewritten between passes,
// a read error in the middle of a pass, io_uring unavailable, and a budget
// lowered below what a plan needs. Each ends in a clear Status (or a clean,
// documented recovery), never a hang (ctest timeout) or a leak (these suites
// also run under ASan with leak detection).
#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "io/fault_injection.h"
#include "runtime/core/log.h"
#include "runtime/device/device.h"
#include "runtime/scheduler/executor.h"
#include "tests/common/host_device.h"
#include "tests/common/testing.h"

namespace layerstream::sched {
namespace {

constexpr uint64_t KiB = 1024;

using testing::fnv1a;

// A file of n random layers (random sizes, random gaps) streamed from disk;
// each compute call checks it saw exactly its layer's current bytes.
struct DiskModel {
  testing::TempDir dir;
  std::string path = dir.file("model.bin");
  std::vector<uint8_t> file;
  std::vector<LayerSpec> layers;
  std::vector<uint64_t> expect;
  std::atomic<int> bad{0}, calls{0};

  DiskModel(int n, std::mt19937_64& rng) {
    file.resize(std::uniform_int_distribution<int>(0, 5000)(rng));
    for (int i = 0; i < n; ++i) {
      LayerSpec l;
      l.name = "layer" + std::to_string(i);
      l.bytes = std::uniform_int_distribution<uint64_t>(20 * KiB, 120 * KiB)(rng);
      l.file = path;
      l.file_offset = file.size();
      l.pin = Tier::kDisk;
      auto b = testing::random_bytes(l.bytes, rng);
      file.insert(file.end(), b.begin(), b.end());
      file.resize(file.size() + rng() % 3000);
      l.compute = [this](const LayerRun& run, Stream& s) -> Status {
        const int layer = run.layer;
        const void* data = run.data;
        const uint64_t bytes = run.bytes;
        return s.host_func([this, layer, data, bytes] {
          if (fnv1a(data, bytes) != expect[layer]) bad.fetch_add(1);
          calls.fetch_add(1);
          return Status::OK();
        });
      };
      layers.push_back(std::move(l));
    }
    testing::write_file(path, file);
    rehash();
  }
  void rehash() {
    expect.clear();
    for (const auto& l : layers) expect.push_back(fnv1a(file.data() + l.file_offset, l.bytes));
  }
  uint64_t max_layer() const {
    uint64_t m = 0;
    for (const auto& l : layers) m = std::max(m, l.bytes);
    return m;
  }
  ExecutorOptions options(bool staged) const {
    ExecutorOptions o;
    o.vram_budget = 3 * (max_layer() + 8 * KiB);
    o.ram_budget = staged ? 64 * KiB : 0;
    o.force_staging = staged;
    o.staging_buffer_bytes = 16 * KiB;
    o.staging_buffers = 4;
    o.link_gbps = 4;
    o.disk_gbps = 1;
    o.auto_replan = false;
    return o;
  }
};

// Captures the library's log lines (all levels) while alive.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<Sink>()), old_level_(logger().level()) {
    logger().sinks().push_back(sink_);
    logger().set_level(spdlog::level::debug);
  }
  ~LogCapture() {
    auto& sinks = logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger().set_level(old_level_);
  }
  std::string text() const {
    std::lock_guard<std::mutex> l(sink_->mu_text);
    return sink_->text;
  }

 private:
  struct Sink : spdlog::sinks::base_sink<std::mutex> {
    std::mutex mu_text;
    std::string text;
    void sink_it_(const spdlog::details::log_msg& msg) override {
      std::lock_guard<std::mutex> l(mu_text);
      text.append(msg.payload.data(), msg.payload.size());
      text += '\n';
    }
    void flush_() override {}
  };
  std::shared_ptr<Sink> sink_;
  spdlog::level::level_enum old_level_;
};

// Param: staged through the ring. Each test streams a DiskModel on the host
// device; reads go through `faults` where a test asks for it.
class StreamingFaults : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dev = testing::open_host_device(1);
    ASSERT_TRUE(dev);
  }
  // m.options() with every read through `faults`.
  ExecutorOptions faulty_options(const DiskModel& m) {
    ExecutorOptions o = m.options(GetParam());
    o.reader.hooks = &faults;
    return o;
  }
  // Every read that touches [begin, end) fails with EIO, from now on.
  void fail_reads_with_eio(uint64_t begin, uint64_t end) {
    io::FaultRule rule;
    rule.kind = io::FaultKind::kEio;
    rule.offset_begin = begin;
    rule.offset_end = end;
    rule.count = UINT64_MAX;
    faults.add(rule);
  }

  std::mt19937_64 rng{testing::fresh_seed()};
  std::unique_ptr<Device> dev;
  io::FaultInjector faults;
};

// The file loses its tail between passes: the next pass that reads a layer
// past the new end fails with an IOError naming the file and the short read;
// the layers still inside the file were delivered intact; later passes fail
// the same way (no hang) and the executor destructs cleanly.
TEST_P(StreamingFaults, FileTruncatedBetweenPassesIsAClearError) {
  DiskModel m(6, rng);
  LS_ASSERT_OK_AND_ASSIGN(auto ex, Executor::create(*dev, m.layers, m.options(GetParam())));
  ASSERT_EQ(ex->plan().count(Tier::kDisk), 6);
  LS_ASSERT_OK(ex->run_pass());
  LS_ASSERT_OK(ex->run_pass());
  EXPECT_EQ(m.bad.load(), 0);
  // Cut inside layer 4 (a random point in its first half).
  const LayerSpec& cut_layer = m.layers[4];
  const uint64_t cut = cut_layer.file_offset + 1 + rng() % (cut_layer.bytes / 2);
  ASSERT_EQ(::truncate(m.path.c_str(), static_cast<off_t>(cut)), 0);
  Status s = ex->run_pass();
  if (s.ok()) s = ex->run_pass();  // the cut layer may have been prefetched before the truncation
  ASSERT_FALSE(s.ok()) << "a pass over a truncated file succeeded";
  EXPECT_TRUE(s.IsIOError() || s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(m.path), std::string::npos) << s.ToString();
  EXPECT_TRUE(s.message().find("short read") != std::string::npos ||
              s.message().find("end of file") != std::string::npos)
      << s.ToString();
  // Every compute call so far saw correct bytes: no layer was computed on a
  // partially read slot.
  EXPECT_EQ(m.bad.load(), 0);
  // Later passes fail too, promptly.
  EXPECT_FALSE(ex->run_pass().ok());
  ex.reset();
}

// The file is rewritten in place (same size, new bytes) between passes: not
// detected (layerstream does not checksum streamed layers); the next passes
// compute on the new bytes, consistently, without error.
TEST_P(StreamingFaults, FileRewrittenInPlaceIsStreamedAsIs) {
  DiskModel m(5, rng);
  LS_ASSERT_OK_AND_ASSIGN(auto ex, Executor::create(*dev, m.layers, m.options(GetParam())));
  LS_ASSERT_OK(ex->run_pass());
  // Drain prefetches of the old bytes: one more pass, then rewrite.
  LS_ASSERT_OK(ex->run_pass());
  ASSERT_EQ(m.bad.load(), 0);
  // Overwrite in place (no O_TRUNC: a truncate-then-write would be a
  // truncation while prefetches of the next pass are reading).
  m.file = testing::random_bytes(m.file.size(), rng);
  {
    std::fstream f(m.path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.is_open());
    f.write(reinterpret_cast<const char*>(m.file.data()), static_cast<std::streamsize>(m.file.size()));
    ASSERT_TRUE(f.good());
  }
  ASSERT_EQ(std::filesystem::file_size(m.path), m.file.size());
  m.rehash();
  m.bad = 0;
  // The first pass after the rewrite may still use layers prefetched earlier.
  LS_ASSERT_OK(ex->run_pass());
  m.bad = 0;
  for (int p = 0; p < 2; ++p) LS_ASSERT_OK(ex->run_pass());
  EXPECT_EQ(m.bad.load(), 0);
}

// EIO in the middle of a pass (through ReaderOptions::hooks): run_pass returns
// an IOError naming the file, the offset and the errno; no compute ran on the
// failed layer's slot with wrong bytes; destruction joins every thread.
TEST_P(StreamingFaults, ReadErrorMidPassNamesFileAndOffset) {
  DiskModel m(6, rng);
  ExecutorOptions o = faulty_options(m);
  LS_ASSERT_OK_AND_ASSIGN(auto ex, Executor::create(*dev, m.layers, o));
  LS_ASSERT_OK(ex->run_pass());
  const LayerSpec& bad_layer = m.layers[3];
  fail_reads_with_eio(bad_layer.file_offset / 4096 * 4096, bad_layer.file_offset + bad_layer.bytes);
  Status s = ex->run_pass();
  if (s.ok()) s = ex->run_pass();
  ASSERT_FALSE(s.ok());
  EXPECT_GT(faults.injected(io::FaultKind::kEio), 0u);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find(m.path), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s.ToString();
  EXPECT_EQ(m.bad.load(), 0);
  ex.reset();  // joins the disk thread; ASan reports anything left behind
}

// A disk-tier layer on the host site is read each pass by the host lane,
// through an io::Reader of its own with the executor's hooks: EIO there fails
// the pass with an IOError naming the host lane, the file, the offset and the
// errno, and no compute ran on bytes that did not arrive.
TEST_P(StreamingFaults, HostLaneReadErrorNamesFileAndOffset) {
  DiskModel m(4, rng);
  for (LayerSpec& l : m.layers) l.host_ok = true;
  ExecutorOptions o = faulty_options(m);
  o.activations_to_host = o.activations_to_device = [](Stream&, int) { return Status::OK(); };
  Plan p;
  p.tiers = {Tier::kDisk, Tier::kDisk, Tier::kDisk, Tier::kDisk};
  p.sites = {Site::kDevice, Site::kDevice, Site::kHost, Site::kDevice};
  p.slots = 2;
  p.prefetch_depth = 1;
  o.plan = p;
  LS_ASSERT_OK_AND_ASSIGN(auto ex, Executor::create(*dev, m.layers, o));
  LS_ASSERT_OK(ex->run_pass());
  EXPECT_EQ(m.calls.load(), 4);
  EXPECT_EQ(m.bad.load(), 0);
  // Only the host lane starts a read at layer 2's first byte (unaligned
  // reads are the buffered reader's; the disk thread reads aligned spans).
  const LayerSpec& host_layer = m.layers[2];
  fail_reads_with_eio(host_layer.file_offset, host_layer.file_offset + 1);
  const int calls_before = m.calls.load();
  Status s = ex->run_pass();
  ASSERT_FALSE(s.ok()) << "a host lane read failed and the pass succeeded";
  EXPECT_GT(faults.injected(io::FaultKind::kEio), 0u);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("host lane read of layer2"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(m.path), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset " + std::to_string(host_layer.file_offset)), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s.ToString();
  EXPECT_EQ(m.bad.load(), 0);
  EXPECT_LT(m.calls.load(), calls_before + 4);  // layer 2 did not compute
  ex.reset();
}

// io_uring setup fails (ENOSYS, as on an old kernel or under seccomp): the
// reader falls back to the pread pool, says so in the log, and every pass
// delivers the right bytes.
TEST_P(StreamingFaults, UringUnavailableFallsBackAndSaysSo) {
  DiskModel m(5, rng);
  faults.fail_uring_setup(ENOSYS);
  ExecutorOptions o = faulty_options(m);
  o.reader.path = io::IoPath::kAuto;
  LogCapture log;
  LS_ASSERT_OK_AND_ASSIGN(auto ex, Executor::create(*dev, m.layers, o));
  for (int p = 0; p < 3; ++p) LS_ASSERT_OK(ex->run_pass());
  EXPECT_EQ(m.bad.load(), 0);
  EXPECT_EQ(m.calls.load(), 3 * 5);
  EXPECT_GT(faults.reads_seen(), 0u);
  const std::string text = log.text();
  // O_DIRECT is refused on some file systems (then io_uring is not tried and
  // the reason is the file system); otherwise the fallback names io_uring.
  EXPECT_TRUE(text.find("io_uring unavailable") != std::string::npos ||
              text.find("O_DIRECT refused") != std::string::npos)
      << text;
  EXPECT_EQ(text.find("with io_uring"), std::string::npos) << text;
}

// Forcing io_uring when it is unavailable is an error at start-up, not a
// silent fallback: the user asked for that path.
TEST_P(StreamingFaults, ForcedUringUnavailableIsAnErrorAtStartup) {
  DiskModel m(3, rng);
  faults.fail_uring_setup(EPERM);
  ExecutorOptions o = faulty_options(m);
  o.reader.path = io::IoPath::kUring;
  auto ex = Executor::create(*dev, m.layers, o);
  ASSERT_FALSE(ex.ok());
  EXPECT_NE(ex.status().message().find("io_uring is unavailable"), std::string::npos) << ex.status().ToString();
  EXPECT_EQ(m.calls.load(), 0);
}

// A plan made for one budget, replayed with a lower budget: OutOfBudget from
// create() naming the bytes needed and available, before any layer runs.
TEST_P(StreamingFaults, BudgetLoweredBelowThePlanIsOutOfBudgetBeforeRunning) {
  DiskModel m(5, rng);
  ExecutorOptions o = m.options(GetParam());
  Plan plan;
  {
    LS_ASSERT_OK_AND_ASSIGN(auto ex, Executor::create(*dev, m.layers, o));
    LS_ASSERT_OK(ex->run_pass());
    plan = ex->plan();
  }
  const int calls_before = m.calls.load();
  ExecutorOptions low = o;
  low.plan = plan;
  ASSERT_GT(plan.vram_bytes, 0u);
  low.vram_budget = plan.vram_bytes - 1;  // one byte less than the plan's residents and window
  auto ex = Executor::create(*dev, m.layers, low);
  ASSERT_FALSE(ex.ok());
  EXPECT_TRUE(ex.status().IsOutOfBudget()) << ex.status().ToString();
  EXPECT_NE(ex.status().message().find(std::to_string(low.vram_budget)), std::string::npos)
      << ex.status().ToString();
  EXPECT_EQ(m.calls.load(), calls_before);
  // The same with the planner choosing: a budget below one layer plus the reserve.
  ExecutorOptions tiny = o;
  tiny.vram_budget = m.max_layer() / 2;
  ex = Executor::create(*dev, m.layers, tiny);
  ASSERT_FALSE(ex.ok());
  EXPECT_TRUE(ex.status().IsOutOfBudget()) << ex.status().ToString();
  EXPECT_EQ(m.calls.load(), calls_before);
}

INSTANTIATE_TEST_SUITE_P(DirectAndStaged, StreamingFaults, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Staged" : "Direct"; });

}  // namespace
}  // namespace layerstream::sched

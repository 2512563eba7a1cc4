// The public Streamer (layerstream/streamer.h) on the host backend: every
// compute call sees its layer's bytes (from host memory and from a file, some
// streamed), passes report sane figures, errors come back as Status before
// anything runs. Uses only the public header (plus test helpers).
#include "layerstream/streamer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>

#include "tests/common/testing.h"

namespace layerstream {
namespace {

constexpr uint64_t KiB = 1024;

using testing::fnv1a;

// Layers of random bytes: even ones in host memory, odd ones at unaligned
// offsets of one file; each compute call checksums its data on the compute
// stream (enqueue_host) and compares with the layer's content.
struct Fixture {
  std::mt19937_64 rng{testing::fresh_seed()};
  testing::TempDir dir;
  std::vector<std::vector<uint8_t>> mem;
  std::vector<uint64_t> expect;
  std::vector<StreamedLayer> layers;
  uint64_t max_bytes = 0, total = 0, host_total = 0;
  std::atomic<int> bad{0}, calls{0}, bad_meta{0};
  std::mutex mu;
  std::vector<int> order;

  explicit Fixture(int n) {
    mem.resize(n);
    expect.resize(n);
    std::vector<uint8_t> file_bytes = testing::random_bytes(std::uniform_int_distribution<int>(1, 5000)(rng), rng);
    std::vector<std::pair<uint64_t, uint64_t>> file_spans(n);  // offset, bytes
    for (int i = 0; i < n; ++i) {
      uint64_t bytes = std::uniform_int_distribution<uint64_t>(8 * KiB, 48 * KiB)(rng) + rng() % 4096;
      std::vector<uint8_t> data = testing::random_bytes(bytes, rng);
      expect[i] = fnv1a(data.data(), data.size());
      max_bytes = std::max(max_bytes, bytes);
      total += bytes;
      StreamedLayer l;
      l.name = "blk" + std::to_string(i);
      l.bytes = bytes;
      if (i % 2 == 0) {
        mem[i] = std::move(data);
        l.host_data = mem[i].data();
        host_total += bytes;
      } else {
        l.file = dir.file("layers.bin");
        l.file_offset = file_bytes.size();
        file_bytes.insert(file_bytes.end(), data.begin(), data.end());
        file_bytes.resize(file_bytes.size() + rng() % 3000, 0x5a);
      }
      l.compute = [this, i, bytes](const LayerCall& c) -> Status {
        if (c.layer != i || c.bytes != bytes || c.native_stream != nullptr || c.data == nullptr ||
            (c.home == LayerHome::kResident) != (c.slot == -1))
          bad_meta.fetch_add(1);
        const void* data = c.data;
        return c.enqueue_host([this, i, data, bytes]() -> Status {
          if (fnv1a(data, bytes) != expect[i]) bad.fetch_add(1);
          calls.fetch_add(1);
          std::lock_guard lock(mu);
          order.push_back(i);
          return Status::OK();
        });
      };
      layers.push_back(std::move(l));
    }
    testing::write_file(dir.file("layers.bin"), file_bytes);
  }

  StreamerOptions options() const {
    StreamerOptions o;
    o.backend = "host";
    o.vram_budget = 3 * (max_bytes + 8 * KiB);  // a window of slots plus a few residents, not all
    o.ram_budget = host_total + 64 * KiB;
    o.sim_link_gbps = 4;
    return o;
  }
};

TEST(Streamer, ComputeSeesEachLayersBytesAndStatsAreSane) {
  const int n = 8;
  Fixture f(n);
  f.layers[1].pin = LayerHome::kDisk;  // a file layer read every pass
  f.layers[2].pin = LayerHome::kRam;   // a memory layer streamed from pinned RAM
  StreamerOptions o = f.options();
  o.trace = true;
  ASSERT_LT(o.vram_budget, f.total);
  auto s = Streamer::create(std::move(f.layers), o);
  LS_ASSERT_OK(s.status());
  Streamer& st = **s;
  EXPECT_EQ(st.home(1), LayerHome::kDisk);
  EXPECT_EQ(st.home(2), LayerHome::kRam);
  EXPECT_EQ(st.last_pass().measured_ms, 0);
  EXPECT_EQ(f.calls.load(), 0);
  const int passes = 4;
  for (int p = 0; p < passes; ++p) LS_ASSERT_OK(st.run_pass(p == 2 ? 16 : 1));
  EXPECT_EQ(st.passes_run(), static_cast<uint64_t>(passes));
  EXPECT_EQ(f.bad.load(), 0) << st.plan_description();
  EXPECT_EQ(f.bad_meta.load(), 0);
  ASSERT_EQ(f.calls.load(), passes * n);
  for (size_t c = 0; c < f.order.size(); ++c) ASSERT_EQ(f.order[c], static_cast<int>(c % n));

  StreamerStats stats = st.last_pass();
  EXPECT_EQ(stats.pass, static_cast<uint64_t>(passes - 1));
  EXPECT_GT(stats.measured_ms, 0);
  EXPECT_GT(stats.lower_bound_ms, 0);
  // Sanity ceilings, not targets: the bound is built from moving-average
  // rates, so a sub-millisecond pass that runs faster than the averages (a
  // quiet moment after a loaded one) can come out a little below it.
  EXPECT_LE(stats.lower_bound_ms, stats.measured_ms * 1.5);
  EXPECT_GT(stats.predicted_ms, 0);
  EXPECT_GT(stats.overlap_efficiency, 0);
  EXPECT_LE(stats.overlap_efficiency, 1.5);
  // The stalls are waits inside the pass: never longer than the pass itself.
  EXPECT_LE(stats.stall_ms, stats.measured_ms);
  EXPECT_GT(stats.streamed_bytes, 0u);
  EXPECT_LE(stats.streamed_bytes, f.total);
  EXPECT_NE(st.plan_description().find("slots"), std::string::npos) << st.plan_description();

  std::string trace = f.dir.file("trace.json");
  LS_ASSERT_OK(st.write_trace(trace));
  std::vector<uint8_t> json = testing::read_file(trace);
  EXPECT_NE(std::string(json.begin(), json.end()).find("traceEvents"), std::string::npos);
}

TEST(Streamer, SerialBaselineSeesTheSameBytes) {
  Fixture f(6);
  StreamerOptions o = f.options();
  o.serial = true;
  o.vram_budget = f.max_bytes + 8 * KiB;  // one slot, nothing resident
  o.io = "pread";
  auto s = Streamer::create(std::move(f.layers), o);
  LS_ASSERT_OK(s.status());
  for (int p = 0; p < 3; ++p) LS_ASSERT_OK((*s)->run_pass());
  EXPECT_EQ(f.bad.load(), 0) << (*s)->plan_description();
  EXPECT_EQ(f.calls.load(), 3 * 6);
  EXPECT_EQ((*s)->last_pass().streamed_bytes, f.total);
  EXPECT_TRUE((*s)->write_trace(f.dir.file("t.json")).IsInvalidArgument());  // trace off
}

// Layer `layer` of six computes with `compute`, which fails: run_pass
// returns that failure, with its code (`has_code`) and its message.
void expect_run_pass_fails_with(int layer, decltype(StreamedLayer::compute) compute, bool (Status::*has_code)() const,
                                const std::string& message) {
  Fixture f(6);
  f.layers[layer].compute = std::move(compute);
  auto s = Streamer::create(std::move(f.layers), f.options());
  LS_ASSERT_OK(s.status());
  Status st = (*s)->run_pass();
  ASSERT_TRUE((st.*has_code)()) << st.ToString();
  EXPECT_NE(st.message().find(message), std::string::npos) << st.ToString();
}

TEST(Streamer, ComputeErrorsComeBackFromRunPass) {
  expect_run_pass_fails_with(
      3,
      [](const LayerCall& c) -> Status { return Status::Unsupported("layer " + std::to_string(c.layer) + " refuses"); },
      &Status::IsUnsupported, "layer 3 refuses");
}

TEST(Streamer, HostFunctionErrorsComeBackFromRunPass) {
  expect_run_pass_fails_with(
      4,
      [](const LayerCall& c) -> Status {
        return c.enqueue_host([]() -> Status { return Status::Corruption("bad weights in layer 4"); });
      },
      &Status::IsCorruption, "bad weights in layer 4");
}

TEST(Streamer, BudgetTooSmallFailsBeforeAnythingRuns) {
  Fixture f(7);
  StreamerOptions o = f.options();
  o.vram_budget = f.max_bytes / 2;  // not even one slot
  auto s = Streamer::create(f.layers, o);
  ASSERT_TRUE(s.status().IsOutOfBudget()) << s.status().ToString();
  EXPECT_EQ(f.calls.load(), 0);

  o = f.options();
  o.ram_budget = 0;  // memory layers that must stream have nowhere to be pinned
  o.vram_budget = 2 * (f.max_bytes + 8 * KiB);
  for (auto& l : f.layers)
    if (l.host_data) l.pin = LayerHome::kRam;
  s = Streamer::create(f.layers, o);
  ASSERT_TRUE(s.status().IsOutOfBudget()) << s.status().ToString();
  EXPECT_EQ(f.calls.load(), 0);
}

TEST(Streamer, BadOptionsAndLayersAreInvalidArguments) {
  Fixture f(6);
  auto expect_invalid = [&](StreamerOptions o, std::vector<StreamedLayer> layers, const std::string& what) {
    auto s = Streamer::create(std::move(layers), std::move(o));
    EXPECT_TRUE(s.status().IsInvalidArgument()) << what << ": " << s.status().ToString();
  };
  StreamerOptions o = f.options();
  o.backend = "tpu";
  expect_invalid(o, f.layers, "backend");
  o = f.options();
  o.io = "carrier-pigeon";
  expect_invalid(o, f.layers, "io");
  o = f.options();
  o.vram_budget = 0;
  expect_invalid(o, f.layers, "vram_budget");
  o = f.options();
  o.sim_link_gbps = -1;
  expect_invalid(o, f.layers, "sim_link_gbps");
  expect_invalid(f.options(), {}, "no layers");
  auto layers = f.layers;
  layers[2].compute = nullptr;
  expect_invalid(f.options(), layers, "no compute");
  layers = f.layers;
  layers[1].host_data = f.mem[0].data();
  expect_invalid(f.options(), layers, "two sources");
  layers = f.layers;
  layers[0].pin = LayerHome::kDisk;
  expect_invalid(f.options(), layers, "disk pin without file");
  layers = f.layers;
  layers[3].bytes = 0;
  expect_invalid(f.options(), layers, "zero bytes");
  EXPECT_EQ(f.calls.load(), 0);

  auto s = Streamer::create(f.layers, f.options());
  LS_ASSERT_OK(s.status());
  EXPECT_TRUE((*s)->run_pass(0).IsInvalidArgument());
  EXPECT_EQ(f.calls.load(), 0);
}

}  // namespace
}  // namespace layerstream

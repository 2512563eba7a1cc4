// Host backend timing: the simulated link's pacing and copy/compute overlap.
//
// BM_SimLinkCopy/MiB:N   one H2D copy of N MiB through a 2 GB/s sim-link
//                        (decimal GB: 512 MiB -> 536870912 / 2e9 = 0.268 s).
//   counters: s (seconds per copy), expected_s (bytes / rate), ratio
//   (s / expected_s), ratio_0.25s (s / 0.25, the figure for 512 MiB).
// BM_Overlap/task_ms:T/same_stream:S   a T ms H2D copy (T ms of bytes at
//   2 GB/s) and a T ms compute task (a host_func busy until its deadline),
//   on the copy and compute streams (S=0) or both on one stream (S=1).
//   counters: wall_ms (enqueue to both done), ratio (wall_ms / T): about 1
//   when they overlap, about 2 when serialised.
// Each benchmark runs 3 iterations x 5 repetitions; min/median/max aggregates.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device/device.h"

namespace layerstream {
namespace {

constexpr double kGbps = 2.0;
using Clock = std::chrono::steady_clock;

struct HostRig {
  std::unique_ptr<Device> device;
  std::unique_ptr<Arena> arena;
  ArenaRegion region;
  HostBuffer src;
};

// A host device with the sim-link on, an arena region of `bytes` and a pinned
// source of `bytes` filled with a non-zero pattern. Null (and SkipWithError) on failure.
std::unique_ptr<HostRig> make_rig(benchmark::State& state, size_t bytes) {
  auto rig = std::make_unique<HostRig>();
  DeviceOptions opts;
  opts.backend = BackendKind::kHost;
  opts.sim_link_gbps = kGbps;
  auto dev = open_device(opts);
  if (!dev.ok()) return state.SkipWithError(dev.status().ToString().c_str()), nullptr;
  rig->device = std::move(dev).value();
  auto arena = rig->device->create_arena(bytes);
  if (!arena.ok()) return state.SkipWithError(arena.status().ToString().c_str()), nullptr;
  rig->arena = std::move(arena).value();
  auto region = rig->arena->allocate("dst", bytes, 4096);
  if (!region.ok()) return state.SkipWithError(region.status().ToString().c_str()), nullptr;
  rig->region = *region;
  auto src = rig->device->alloc_pinned(bytes);
  if (!src.ok()) return state.SkipWithError(src.status().ToString().c_str()), nullptr;
  rig->src = std::move(src).value();
  auto* p = static_cast<unsigned char*>(rig->src.data());
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i * 131 + 7);
  // Fault the destination pages in so the first timed copy is not paying for them.
  std::memset(rig->region.ptr, 1, bytes);
  return rig;
}

void report_error(benchmark::State& state, const Status& s) {
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
}

void BM_SimLinkCopy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  auto rig = make_rig(state, bytes);
  if (!rig) return;
  auto stream = rig->device->create_stream(StreamRole::kCopy);
  if (!stream.ok()) return report_error(state, stream.status());
  double total_s = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    Status s = (*stream)->copy_h2d(rig->region.ptr, rig->src.data(), bytes);
    if (s.ok()) s = (*stream)->synchronize();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!s.ok()) return report_error(state, s);
    state.SetIterationTime(secs);
    total_s += secs;
  }
  if (std::memcmp(rig->region.ptr, rig->src.data(), bytes) != 0) {
    return state.SkipWithError("copied bytes differ from the source");
  }
  const double mean_s = total_s / static_cast<double>(state.iterations());
  const double expected_s = static_cast<double>(bytes) / (kGbps * 1e9);
  state.counters["s"] = mean_s;
  state.counters["expected_s"] = expected_s;
  state.counters["ratio"] = mean_s / expected_s;
  if (state.range(0) == 512) state.counters["ratio_0.25s"] = mean_s / 0.25;
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
}

// Busy until `ms` have passed since it started: a compute task that holds a
// stream for a known time whatever the machine's load.
Status compute_task(double ms) {
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
  volatile uint64_t sink = 0;
  while (Clock::now() < end) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
  return Status::OK();
}

void BM_Overlap(benchmark::State& state) {
  const double task_ms = static_cast<double>(state.range(0));
  const bool same_stream = state.range(1) != 0;
  const size_t bytes = static_cast<size_t>(task_ms / 1000.0 * kGbps * 1e9);
  auto rig = make_rig(state, bytes);
  if (!rig) return;
  auto copy = rig->device->create_stream(StreamRole::kCopy);
  auto compute = rig->device->create_stream(StreamRole::kCompute);
  if (!copy.ok()) return report_error(state, copy.status());
  if (!compute.ok()) return report_error(state, compute.status());
  Stream* copy_s = same_stream ? compute->get() : copy->get();
  Stream* compute_s = compute->get();
  double total_ms = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    Status s = copy_s->copy_h2d(rig->region.ptr, rig->src.data(), bytes);
    if (s.ok()) s = compute_s->host_func([task_ms] { return compute_task(task_ms); });
    if (s.ok()) s = copy_s->synchronize();
    if (s.ok()) s = compute_s->synchronize();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!s.ok()) return report_error(state, s);
    state.SetIterationTime(secs);
    total_ms += secs * 1e3;
  }
  const double wall_ms = total_ms / static_cast<double>(state.iterations());
  state.counters["wall_ms"] = wall_ms;
  state.counters["ratio"] = wall_ms / task_ms;
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// Both benchmarks: manual time in ms, 3 iterations x 5 repetitions, with the
// min and max over the repetitions beside the mean.
void timed_runs(benchmark::internal::Benchmark* b) {
  b->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3)
      ->Repetitions(5)
      ->ComputeStatistics("min", min_of)
      ->ComputeStatistics("max", max_of);
}

BENCHMARK(BM_SimLinkCopy)->ArgName("MiB")->Arg(16)->Arg(512)->Apply(timed_runs);
BENCHMARK(BM_Overlap)->ArgNames({"task_ms", "same_stream"})->ArgsProduct({{20, 200}, {0, 1}})->Apply(timed_runs);

}  // namespace
}  // namespace layerstream

BENCHMARK_MAIN();

// GPU benchmarks (Google Benchmark; run by bench/gpu-check.sh on a lent GPU):
//  - d2d: device-to-device copy of 1 GiB; GBps counts bytes read + written,
//    the device memory bandwidth the matvec figures are compared with;
//  - h2d/{pinned,pageable}/chunk_kib:N: 256 MiB host -> device in chunks of
//    N KiB (cudaMemcpyAsync per chunk, one stream); GBps = bytes / time;
//  - matmul/<TYPE>/tok:T: the CUDA matmul of a 32768 x 8192 weight (several
//    times the L2) for every weight type the type table marks supported;
//    matmul_lane_per_block/...: Q8_0/Q4_0/Q4_1 through the lane-per-block
//    kernel, beside the coalesced one (issue 20, defect 6), same binary.
//    weight_GBps = weight bytes / time; pct_of_d2d = weight_GBps over the d2d
//    figure (how close the matvec is to streaming the weight at memory
//    speed); TFLOPs = 2 n_out n_in T / time (meaningful at large T).
// Times are CUDA events around the work (UseManualTime). A type whose CUDA
// kernel is missing reports the kernel's error instead of a figure.
// Exits 2 with "no CUDA device: <reason>" when no device can be used.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench/gpu/gpu_bench_util.h"
#include "kernels/cuda/launchers.h"
#include "kernels/kernels.h"
#include "runtime/core/status_macros.h"

namespace layerstream::gpubench {
namespace {

struct Env {
  std::unique_ptr<Device> dev;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<kernels::Kernels> k;
  cudaStream_t s = nullptr;
  double d2d_gbps = 0;  // read + write bytes per second / 1e9
};

Env& env() {
  static Env e;
  return e;
}

Status open_env() {
  DeviceOptions o;
  o.backend = BackendKind::kCuda;
  LS_ASSIGN_OR_RETURN(env().dev, open_device(o));
  LS_ASSIGN_OR_RETURN(env().stream, env().dev->create_stream(StreamRole::kCompute));
  LS_ASSIGN_OR_RETURN(env().k, kernels::make_kernels(BackendKind::kCuda));
  env().s = static_cast<cudaStream_t>(env().stream->native_handle());
  return Status::OK();
}

constexpr size_t kD2dBytes = size_t{1} << 30;

Result<double> d2d_seconds(const void* src, void* dst) {
  return time_on_stream(env().s, 5, [&]() -> Status {
    LS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, kD2dBytes, cudaMemcpyDeviceToDevice, env().s));
    return Status::OK();
  });
}

void BM_d2d(benchmark::State& state) {
  auto a = cuda::device_alloc(kD2dBytes, "cudaMalloc(d2d src)");
  auto b = cuda::device_alloc(kD2dBytes, "cudaMalloc(d2d dst)");
  if (!a.ok() || !b.ok()) return state.SkipWithError((a.ok() ? b.status() : a.status()).ToString().c_str());
  double secs = 0;
  int64_t n = 0;
  for (auto _ : state) {
    auto t = d2d_seconds(a->get(), b->get());
    if (!t.ok()) return state.SkipWithError(t.status().ToString().c_str());
    state.SetIterationTime(*t);
    secs += *t;
    ++n;
  }
  state.counters["GBps"] = 2.0 * kD2dBytes * n / secs / 1e9;
}

constexpr size_t kH2dBytes = size_t{256} << 20;

void BM_h2d(benchmark::State& state, bool pinned) {
  const size_t chunk = static_cast<size_t>(state.range(0)) << 10;
  auto dst = cuda::device_alloc(kH2dBytes, "cudaMalloc(h2d dst)");
  if (!dst.ok()) return state.SkipWithError(dst.status().ToString().c_str());
  cuda::PinnedBuffer pin;
  std::unique_ptr<uint8_t[]> pageable;
  const void* src = nullptr;
  if (pinned) {
    auto p = cuda::pinned_alloc(kH2dBytes, "cudaHostAlloc(h2d src)");
    if (!p.ok()) return state.SkipWithError(p.status().ToString().c_str());
    pin = std::move(p).value();
    std::memset(pin.get(), 0x5a, kH2dBytes);
    src = pin.get();
  } else {
    pageable.reset(new uint8_t[kH2dBytes]);
    std::memset(pageable.get(), 0x5a, kH2dBytes);
    src = pageable.get();
  }
  double secs = 0;
  int64_t n = 0;
  for (auto _ : state) {
    auto t = time_on_stream(env().s, 1, [&]() -> Status {
      for (size_t off = 0; off < kH2dBytes; off += chunk) {
        LS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<uint8_t*>(dst->get()) + off,
                                                static_cast<const uint8_t*>(src) + off,
                                                std::min(chunk, kH2dBytes - off), cudaMemcpyHostToDevice, env().s));
      }
      return Status::OK();
    });
    if (!t.ok()) return state.SkipWithError(t.status().ToString().c_str());
    state.SetIterationTime(*t);
    secs += *t;
    ++n;
  }
  state.counters["GBps"] = static_cast<double>(kH2dBytes) * n / secs / 1e9;
}

constexpr int64_t kOut = 32768, kIn = 8192;

// The device copy of the last type's weight: Google Benchmark calls a
// benchmark function several times while it sizes the iteration count, and
// the three token counts of a type follow each other, so one upload serves
// them all.
struct WeightCache {
  GgmlType type = GgmlType::F32;
  cuda::DeviceBuffer w;
  uint64_t bytes = 0;
};

Result<const WeightCache*> weight_for(GgmlType type) {
  static WeightCache cache;
  if (cache.w && cache.type == type) return &cache;
  cache.w.reset();
  std::mt19937_64 rng(7);
  LS_ASSIGN_OR_RETURN(std::vector<uint8_t> w, random_weight(type, kOut, kIn, rng, 64));
  LS_ASSIGN_OR_RETURN(cache.w, upload(w));
  cache.type = type;
  cache.bytes = w.size();
  return &cache;
}

// lane_per_block: the Q8_0/Q4_0/Q4_1 matvec through the lane-per-block
// kernel instead of the coalesced one (a same-binary before/after).
void BM_matmul(benchmark::State& state, GgmlType type, int64_t n_tok, bool lane_per_block = false) {
  auto w = weight_for(type);
  if (!w.ok()) return state.SkipWithError(w.status().ToString().c_str());
  std::mt19937_64 rng(11);
  std::vector<float> x(n_tok * kIn);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& v : x) v = d(rng);
  const uint64_t scratch_bytes = env().k->matmul_scratch_bytes(type, kOut, kIn, n_tok);
  auto dx = upload(x);
  auto dy = cuda::device_alloc(n_tok * kOut * sizeof(float), "cudaMalloc(y)");
  auto ds = cuda::device_alloc(std::max<uint64_t>(scratch_bytes, 1), "cudaMalloc(scratch)");
  for (const Status& s : {dx.status(), dy.status(), ds.status()}) {
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
  }
  const uint64_t weight_bytes = (*w)->bytes;
  kernels::MatmulParams p{(*w)->w.get(), type, kOut, kIn, static_cast<const float*>(dx->get()), n_tok,
                          static_cast<float*>(dy->get()), ds->get(), scratch_bytes};
  const int reps = n_tok > 8 ? 2 : 10;
  double secs = 0;
  int64_t n = 0;
  for (auto _ : state) {
    auto t = time_on_stream(env().s, reps, [&] {
      return lane_per_block ? kernels::cuda::launch_matvec_lane_per_block(p, env().s) : env().k->matmul(p, *env().stream);
    });
    if (!t.ok()) return state.SkipWithError(t.status().ToString().c_str());
    state.SetIterationTime(*t);
    secs += *t;
    ++n;
  }
  const double per = secs / n;
  state.counters["weight_GBps"] = weight_bytes / per / 1e9;
  if (env().d2d_gbps > 0) state.counters["pct_of_d2d"] = 100.0 * weight_bytes / per / 1e9 / env().d2d_gbps;
  state.counters["TFLOPs"] = 2.0 * kOut * kIn * n_tok / per / 1e12;
}

}  // namespace
}  // namespace layerstream::gpubench

int main(int argc, char** argv) {
  using namespace layerstream;
  using namespace layerstream::gpubench;
  if (Status dev = cuda_device_available(); !dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.message().c_str());
    return kExitNoDevice;
  }
  if (Status s = open_env(); !s.ok()) {
    std::fprintf(stderr, "cannot open the CUDA device: %s\n", s.ToString().c_str());
    return 1;
  }
  {  // the memory-bandwidth reference for pct_of_d2d
    auto a = cuda::device_alloc(kD2dBytes, "cudaMalloc(d2d src)");
    auto b = cuda::device_alloc(kD2dBytes, "cudaMalloc(d2d dst)");
    if (a.ok() && b.ok()) {
      auto warm = d2d_seconds(a->get(), b->get());
      auto t = d2d_seconds(a->get(), b->get());
      if (warm.ok() && t.ok()) env().d2d_gbps = 2.0 * kD2dBytes / *t / 1e9;
    }
  }
  benchmark::RegisterBenchmark("d2d", BM_d2d)->UseManualTime()->Unit(benchmark::kMillisecond);
  for (bool pinned : {true, false}) {
    auto* b = benchmark::RegisterBenchmark(pinned ? "h2d/pinned" : "h2d/pageable",
                                           [pinned](benchmark::State& st) { BM_h2d(st, pinned); });
    b->ArgName("chunk_kib")->UseManualTime()->Unit(benchmark::kMillisecond);
    for (int64_t kib : {64, 256, 1024, 4096, 16384, 65536}) b->Arg(kib);
  }
  for (GgmlType type : supported_weight_types()) {
    for (int64_t tok : {1, 8, 512}) {
      const std::string name = std::string("matmul/") + ggml_type_traits(type).name + "/tok:" + std::to_string(tok);
      benchmark::RegisterBenchmark(name.c_str(), [type, tok](benchmark::State& st) { BM_matmul(st, type, tok); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1}) {
    for (int64_t tok : {1, 8}) {
      const std::string name =
          std::string("matmul_lane_per_block/") + ggml_type_traits(type).name + "/tok:" + std::to_string(tok);
      benchmark::RegisterBenchmark(name.c_str(), [type, tok](benchmark::State& st) { BM_matmul(st, type, tok, true); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("d2d_GBps_reference", std::to_string(env().d2d_gbps));
  benchmark::AddCustomContext("device", env().dev->info().name);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  env() = Env{};
  return 0;
}

// Host matvec bandwidth: y = W x for F16, Q8_0 and Q4_0 weights of 4096x4096,
// 4096x14336 and 14336x4096 (n_out x n_in), multi-threaded over rows as the
// host backend runs it. bytes_per_second counts the weight bytes read per
// product. Beside them, memcpy of 256 MiB (bytes_per_second = bytes copied)
// single-threaded and split over the same thread count, so the ratio
// matvec / memcpy is measured in one binary. Each matvec run also times a
// threaded memcpy right after its loop (counters memcpy_Bps and
// ratio = weight bytes/s over that memcpy's bytes/s), so on a shared machine
// the ratio compares two figures taken under the same load.
// matvec_avx2/... runs the same product with the AVX2 single-row kernels
// (when the CPU picks a faster ISA), a same-binary before/after.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/math/convert_row.h"

namespace layerstream::kernels {
namespace {

int bench_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

ThreadPool& pool() {
  static ThreadPool p(bench_threads());
  return p;
}

// n_out rows, each a copy of one encoded random row (content does not change speed).
std::vector<uint8_t> make_weight(GgmlType type, int64_t n_out, int64_t n_in) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> row(n_in);
  for (float& v : row) v = d(rng);
  const uint64_t rb = ggml_row_bytes(ggml_type_traits(type), n_in);
  std::vector<uint8_t> w(rb * n_out);
  if (!math::encode_row(type, row.data(), n_in, w.data()).ok()) std::abort();
  for (int64_t r = 1; r < n_out; ++r) std::memcpy(w.data() + r * rb, w.data(), rb);
  return w;
}

constexpr size_t kCopyBytes = size_t{256} << 20;

// Copies `bytes` of src into dst split over the pool's threads.
void threaded_copy(uint8_t* dst, const uint8_t* src, size_t bytes) {
  const int64_t chunks = pool().size();
  pool().parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const size_t lo = bytes * c / chunks, hi = bytes * (c + 1) / chunks;
      std::memcpy(dst + lo, src + lo, hi - lo);
    }
  });
}

// Bytes/s of a threaded memcpy of 128 MiB (4x the L3), best of 3.
double memcpy_bytes_per_second() {
  constexpr size_t kBytes = size_t{128} << 20;
  static std::vector<uint8_t> src(kBytes, 1), dst(kBytes, 2);
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    threaded_copy(dst.data(), src.data(), kBytes);
    benchmark::DoNotOptimize(dst.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(kBytes) / s);
  }
  return best;
}

// avx2_rows: false = cpu::matmul as the host backend runs it; true = the AVX2 single-row kernels.
void BM_Matvec(benchmark::State& state, GgmlType type, int64_t n_out, int64_t n_in, bool avx2_rows) {
  const std::vector<uint8_t> w = make_weight(type, n_out, n_in);
  std::vector<float> x(n_in, 0.5f), y(n_out);
  const MatmulParams p{w.data(), type, n_out, n_in, x.data(), 1, y.data()};
  if (!validate(p).ok()) std::abort();
  const cpu::RowKernels k = cpu::avx2::row_kernels(type);
  const uint64_t row_bytes = ggml_row_bytes(ggml_type_traits(type), n_in);
  const int64_t grain = std::max<int64_t>(1, 16384 / n_in);  // as cpu::matmul
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (avx2_rows) {
      parallel_rows(&pool(), n_out, grain, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) y[o] = k.dot(w.data() + o * row_bytes, x.data(), n_in);
      });
    } else {
      cpu::matmul(p, &pool());
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double copy = memcpy_bytes_per_second();
  const double rate = static_cast<double>(state.iterations()) * static_cast<double>(w.size()) / secs;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
  state.counters["memcpy_Bps"] = copy;
  state.counters["ratio"] = rate / copy;
  state.SetLabel(std::string(avx2_rows ? "avx2" : cpu::row_kernels_isa()) + ", " + std::to_string(pool().size()) +
                 " threads");
}

void BM_Memcpy(benchmark::State& state, bool threaded) {
  std::vector<uint8_t> src(kCopyBytes, 1), dst(kCopyBytes, 2);  // touched: no page faults in the loop
  for (auto _ : state) {
    if (threaded) {
      threaded_copy(dst.data(), src.data(), kCopyBytes);
    } else {
      std::memcpy(dst.data(), src.data(), kCopyBytes);
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kCopyBytes));
  state.SetLabel(threaded ? std::to_string(pool().size()) + " threads" : "1 thread");
}

const bool registered = [] {
  struct Shape {
    int64_t n_out, n_in;
  };
  for (GgmlType t : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (Shape s : {Shape{4096, 4096}, Shape{4096, 14336}, Shape{14336, 4096}}) {
      const std::string name = std::string("matvec/") + ggml_type_traits(t).name + "/" + std::to_string(s.n_out) +
                               "x" + std::to_string(s.n_in);
      benchmark::RegisterBenchmark(name.c_str(), BM_Matvec, t, s.n_out, s.n_in, false)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      if (std::string(cpu::row_kernels_isa()) != "avx2" && cpu::avx2::supported()) {
        const std::string base = "matvec_avx2" + name.substr(name.find('/'));
        benchmark::RegisterBenchmark(base.c_str(), BM_Matvec, t, s.n_out, s.n_in, true)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  // The Q5/K-quant/IQ4 types (issue 13), one shape each.
  for (GgmlType t : {GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    const std::string name = std::string("matvec/") + ggml_type_traits(t).name + "/4096x4096";
    benchmark::RegisterBenchmark(name.c_str(), BM_Matvec, t, 4096, 4096, false)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  benchmark::RegisterBenchmark("memcpy/1thread/256MiB", BM_Memcpy, false)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("memcpy/threads/256MiB", BM_Memcpy, true)->Unit(benchmark::kMillisecond)->UseRealTime();
  return true;
}();

}  // namespace
}  // namespace layerstream::kernels

BENCHMARK_MAIN();

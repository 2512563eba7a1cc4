// Host matvec bandwidth: y = W x for F16, Q8_0 and Q4_0 weights of 4096x4096,
// 4096x14336 and 14336x4096 (n_out x n_in), multi-threaded over rows as the
// host backend runs it. bytes_per_second counts the weight bytes read per
// product. Beside them, memcpy of 256 MiB (bytes_per_second = bytes copied)
// single-threaded and split over the same thread count, so the ratio
// matvec / memcpy is measured in one binary, on one machine state.
#include <benchmark/benchmark.h>

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

void BM_Matvec(benchmark::State& state, GgmlType type, int64_t n_out, int64_t n_in) {
  const std::vector<uint8_t> w = make_weight(type, n_out, n_in);
  std::vector<float> x(n_in, 0.5f), y(n_out);
  const MatmulParams p{w.data(), type, n_out, n_in, x.data(), 1, y.data()};
  if (!validate(p).ok()) std::abort();
  for (auto _ : state) {
    cpu::matmul(p, &pool());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
  state.SetLabel(std::string(cpu::row_kernels_isa()) + ", " + std::to_string(pool().size()) + " threads");
}

constexpr size_t kCopyBytes = size_t{256} << 20;

void BM_Memcpy(benchmark::State& state, bool threaded) {
  std::vector<uint8_t> src(kCopyBytes, 1), dst(kCopyBytes, 2);  // touched: no page faults in the loop
  for (auto _ : state) {
    if (threaded) {
      const int64_t chunks = pool().size();
      pool().parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          const size_t lo = kCopyBytes * c / chunks, hi = kCopyBytes * (c + 1) / chunks;
          std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
        }
      });
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
      benchmark::RegisterBenchmark(name.c_str(), BM_Matvec, t, s.n_out, s.n_in)->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  benchmark::RegisterBenchmark("memcpy/1thread/256MiB", BM_Memcpy, false)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("memcpy/threads/256MiB", BM_Memcpy, true)->Unit(benchmark::kMillisecond)->UseRealTime();
  return true;
}();

}  // namespace
}  // namespace layerstream::kernels

BENCHMARK_MAIN();

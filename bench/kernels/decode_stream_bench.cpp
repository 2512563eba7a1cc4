// RAM-bound decode: the matrix-vector products of one decode pass of the
// 768 MiB Q8_0 example model (`layerstream example-model --size 768MiB
// --dtype q8_0`: 14 blocks of hidden 2048, FFN 5632, 16 heads / 4 KV heads of
// 128, and a 32000-row head), 706 MiB of weights laid out one after another
// on 2 MiB pages as the host arena holds them, run in the pass's order and
// grouping (Q/K/V as one job, gate/up as one, then O, down, head) with the
// pool's threads. Each product's weights were evicted by the rest of the pass,
// so this measures the read bandwidth the decode kernels reach from RAM, apart
// from attention, norms and the executor. bytes_per_second = weight bytes per
// pass; counter stream_GBps = a plain read of the same bytes split over the
// same threads right after (4 prefetched streams per thread, the best read
// pattern found here, so it stands for the RAM ceiling), and ratio = matvec /
// stream under the same load.
// Wall time (UseRealTime): the threads' CPU time says nothing of the memory.
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace layerstream::kernels {
namespace {

constexpr int64_t kHidden = 2048, kFfn = 5632, kKv = 512, kVocab = 32000, kBlocks = 14;

struct Arena {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  Arena(const Arena&) = delete;
  explicit Arena(size_t n) : bytes(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    (void)madvise(p, n, MADV_HUGEPAGE);
    base = static_cast<uint8_t*>(p);
  }
  ~Arena() { munmap(base, bytes); }
};

// One Q8_0 matrix in the arena: random quants, scale 1/64 in every block
// (the content does not change the speed; a fixed normal scale keeps the
// f32 arithmetic away from denormals and NaNs).
struct Matrix {
  const uint8_t* w;
  int64_t n_out, n_in;
  uint64_t bytes() const { return ggml_row_bytes(ggml_type_traits(GgmlType::Q8_0), n_in) * n_out; }
};

struct Pass {
  std::vector<Matrix> mats;  // per block: q k v o gate up down; then the head
  size_t total = 0;
  std::unique_ptr<Arena> arena;
  Pass() {
    const auto add = [&](int64_t n_out, int64_t n_in) {
      mats.push_back({nullptr, n_out, n_in});
      total += mats.back().bytes();
    };
    for (int b = 0; b < kBlocks; ++b) {
      add(kHidden, kHidden), add(kKv, kHidden), add(kKv, kHidden), add(kHidden, kHidden);
      add(kFfn, kHidden), add(kFfn, kHidden), add(kHidden, kFfn);
    }
    add(kVocab, kHidden);
    arena = std::make_unique<Arena>(total);
    std::mt19937_64 rng(5);
    uint8_t* p = arena->base;
    for (size_t i = 0; i + 8 <= total; i += 8) {
      const uint64_t v = rng();
      std::memcpy(p + i, &v, 8);
    }
    constexpr uint16_t kScale = 0x2400;  // f16 1/64
    for (size_t i = 0; i + 34 <= total; i += 34) std::memcpy(p + i, &kScale, 2);
    size_t off = 0;
    for (Matrix& m : mats) {
      m.w = p + off;
      off += m.bytes();
    }
  }
};

Pass& pass() {
  static Pass p;
  return p;
}

void run_pass(ThreadPool& pool, const std::vector<float>& x, std::vector<float>& y, cpu::CpuIsa isa) {
  const auto params = [&](const Matrix& m, size_t y_off) {
    return MatmulParams{m.w, GgmlType::Q8_0, m.n_out, m.n_in, x.data(), 1, y.data() + y_off};
  };
  const std::vector<Matrix>& ms = pass().mats;
  size_t i = 0;
  for (int b = 0; b < kBlocks; ++b, i += 7) {
    const MatmulParams qkv[3] = {params(ms[i], 0), params(ms[i + 1], kHidden), params(ms[i + 2], kHidden + kKv)};
    cpu::matmul_fast_group(qkv, 3, &pool, isa);
    cpu::matmul_fast(params(ms[i + 3], 0), &pool, isa);
    const MatmulParams gu[2] = {params(ms[i + 4], 0), params(ms[i + 5], kFfn)};
    cpu::matmul_fast_group(gu, 2, &pool, isa);
    cpu::matmul_fast(params(ms[i + 6], 0), &pool, isa);  // x is wider than needed: reads kFfn
  }
  cpu::matmul_fast(params(ms[i], 0), &pool, isa);
}

#if defined(__x86_64__)
// The fastest plain read found on the build machine (31 GB/s on 2 threads,
// against 25-29 for one stream per thread without prefetch): the part cut
// into 4 streams read side by side, each prefetched 1 KiB ahead.
__attribute__((target("avx512f"))) float read_avx512(const uint8_t* p, size_t n) {
  constexpr int kStreams = 4;
  const size_t per = n / kStreams / 128 * 128;
  __m512 a = _mm512_setzero_ps(), b = a;
  for (size_t i = 0; i < per; i += 128) {
    for (int s = 0; s < kStreams; ++s) {
      const uint8_t* q = p + s * per + i;
      _mm_prefetch(reinterpret_cast<const char*>(q) + 1024, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(q) + 1088, _MM_HINT_T0);
      a = _mm512_add_ps(a, _mm512_loadu_ps(reinterpret_cast<const float*>(q)));
      b = _mm512_add_ps(b, _mm512_loadu_ps(reinterpret_cast<const float*>(q + 64)));
    }
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a, b));
}
#endif

// Seconds for one read of the arena split in `pool.size()` contiguous parts.
double stream_seconds(ThreadPool& pool) {
  const Pass& p = pass();
  const int64_t parts = pool.size();
  std::vector<float> sink(parts);
  const auto t0 = std::chrono::steady_clock::now();
  pool.parallel_for(parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const size_t lo = p.total * c / parts / 64 * 64, hi = p.total * (c + 1) / parts / 64 * 64;
#if defined(__x86_64__)
      sink[c] = read_avx512(p.arena->base + lo, hi - lo);
#else
      float s = 0;
      for (size_t i = lo; i < hi; i += 64) s += p.arena->base[i];
      sink[c] = s;
#endif
    }
  });
  benchmark::DoNotOptimize(sink.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void BM_DecodePass(benchmark::State& state, int threads, cpu::CpuIsa isa) {
  ThreadPool pool(threads);
  Pass& p = pass();
  std::vector<float> x(kFfn), y(kVocab + kFfn * 2);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& v : x) v = d(rng);
  run_pass(pool, x, y, isa);  // warm-up: page the arena in
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    run_pass(pool, x, y, isa);
    benchmark::DoNotOptimize(y.data());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = process_cpu_seconds() - cpu0;
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(p.total));
  double best = 1e9;
  for (int i = 0; i < 3; ++i) best = std::min(best, stream_seconds(pool));
  const double matvec = static_cast<double>(state.iterations()) * static_cast<double>(p.total) / secs;
  const double stream = static_cast<double>(p.total) / best;
  state.counters["matvec_GBps"] = matvec / 1e9;
  state.counters["stream_GBps"] = stream / 1e9;
  state.counters["ratio"] = matvec / stream;
  // CPU time of all threads per pass (ms): on a loaded machine steadier than
  // the wall time, and it counts the cycles stalled on memory.
  state.counters["cpu_ms_all"] = cpu * 1e3 / static_cast<double>(state.iterations());
}

int register_all() {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int threads : {1, std::min(hw, 2)}) {
    for (auto [isa, name] : {std::pair{cpu::CpuIsa::kAvx512, "avx512"}, std::pair{cpu::CpuIsa::kAvx2, "avx2"}}) {
      benchmark::RegisterBenchmark(
          (std::string("Q8_0/m768_decode_pass/") + name + "/threads:" + std::to_string(threads)).c_str(),
          BM_DecodePass, threads, isa)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    if (hw < 2) break;
  }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace layerstream::kernels

BENCHMARK_MAIN();

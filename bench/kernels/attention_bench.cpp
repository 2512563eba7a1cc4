// Decode attention (one token) over a long KV cache at the 768 MiB example
// model's shape (16 query heads, 4 KV heads, head_dim 128), F32 and F16
// caches, 64 and 2048 positions, 1 and 2 threads: the position-split path
// (attention_split.h, what attention() takes past one chunk) side by side with
// the per-(token, KV head) path. bytes_per_second = K and V cache bytes read.
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention_split.h"
#include "kernels/cpu/ops.h"
#include "kernels/math/fp16.h"

namespace layerstream::kernels {
namespace {

constexpr int64_t kHeads = 16, kKvHeads = 4, kHeadDim = 128;

void BM_AttentionDecode(benchmark::State& state, GgmlType kv_type, int64_t n_pos, int threads, bool split) {
  const int64_t row = kKvHeads * kHeadDim, n = n_pos * row;
  const size_t esz = kv_type == GgmlType::F32 ? 4 : 2;
  std::vector<uint8_t> kc(n * esz), vc(n * esz);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < n; ++i) {
    const float k = d(rng), v = d(rng);
    if (kv_type == GgmlType::F32) {
      reinterpret_cast<float*>(kc.data())[i] = k;
      reinterpret_cast<float*>(vc.data())[i] = v;
    } else {
      reinterpret_cast<uint16_t*>(kc.data())[i] = math::f32_to_f16(k);
      reinterpret_cast<uint16_t*>(vc.data())[i] = math::f32_to_f16(v);
    }
  }
  std::vector<float> q(kHeads * kHeadDim), out(q.size());
  for (float& x : q) x = d(rng);
  AttentionParams p;
  p.q = q.data();
  p.k_cache = kc.data();
  p.v_cache = vc.data();
  p.kv_type = kv_type;
  p.n_ctx = n_pos;
  p.start_pos = n_pos - 1;
  p.n_tokens = 1;
  p.n_head = kHeads;
  p.n_kv_head = kKvHeads;
  p.head_dim = kHeadDim;
  p.out = out.data();
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  for (auto _ : state) {
    if (split) {
      cpu::attention_split(p, pool.get(), 0, n_pos, scale);
    } else {
      cpu::attention_by_heads(p, pool.get(), scale);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * n * static_cast<int64_t>(esz));
  state.SetLabel(split ? "split" : "by-heads");
}

int register_all() {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16}) {
    for (int64_t pos : {64, 2048}) {
      for (int threads : {1, 2}) {
        for (bool split : {false, true}) {
          if (split && pos <= cpu::kSplitPositions) continue;  // one chunk: attention() does not split
          const std::string name = std::string(ggml_type_traits(t).name) + "/pos:" + std::to_string(pos) +
                                   "/threads:" + std::to_string(threads) + (split ? "/split" : "/by-heads");
          benchmark::RegisterBenchmark(name.c_str(), BM_AttentionDecode, t, pos, threads, split)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
  }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace layerstream::kernels

BENCHMARK_MAIN();

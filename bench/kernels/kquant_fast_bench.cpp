// The fast-path kernels of the Q5, K-quant and IQ4 types (qdot_kquant_avx2.inc,
// qdot_kquant_avx512.cpp) against the exact path (f32 activations), one
// thread, at the 768 MiB example model's FFN-down shape (2048 x 5632) and
// its attention shape (2048 x 2048): decode (1 token) and a prefill tile (32
// tokens). Every kernel this CPU runs: exact, avx512-vnni, avx-vnni, avx2
// (pmaddubsw, called directly where AVX-VNNI exists) and generic (1 token).
// items_per_second = weights x tokens (multiply-adds per second).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "bench/kernels/bench_inputs.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/qdot.h"
#include "kernels/math/convert_row.h"

namespace layerstream::kernels {
namespace {

enum class Impl { kExact, kAvx512, kAvxVnni, kAvx2, kGeneric };

cpu::QuantKernels kernels(GgmlType type, Impl impl) {
  switch (impl) {
    case Impl::kAvx512: return cpu::avx512::quant_kernels(type);
    case Impl::kAvxVnni: return cpu::avx2::quant_kernels(type);
    case Impl::kAvx2: return cpu::avx2::quant_kernels_no_vnni(type);
    default: return cpu::generic::quant_kernels(type);
  }
}

void BM_KquantMatmul(benchmark::State& state, GgmlType type, int64_t n_out, int64_t n_in, int64_t n_tok, Impl impl) {
  const std::vector<uint8_t> w = random_weight(type, n_out, n_in);
  std::vector<float> x = uniform_floats(n_in * n_tok, 3), y(n_out * n_tok);
  const MatmulParams p{w.data(), type, n_out, n_in, x.data(), n_tok, y.data()};
  const cpu::QuantKernels k = kernels(type, impl);
  const uint64_t row_bytes = ggml_row_bytes(ggml_type_traits(type), n_in);
  std::vector<cpu::QBlock> xq(n_tok * n_in / cpu::kQBlock);
  for (auto _ : state) {
    if (impl == Impl::kExact) {
      cpu::matmul(p, nullptr);
    } else {  // what matmul_fast does on one thread: quantise, then the kernel over all rows
      for (int64_t t = 0; t < n_tok; ++t) k.quantize(x.data() + t * n_in, n_in, xq.data() + t * (n_in / cpu::kQBlock));
      k.gemm(w.data(), row_bytes, n_out, xq.data(), n_tok, n_in, y.data(), n_out);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n_out * n_in * n_tok);
  state.SetLabel(impl == Impl::kExact ? "exact" : k.isa);
}

int register_all() {
  struct Shape {
    const char* name;
    int64_t n_out, n_in;
  };
  const bool avx512 = cpu::avx512::vnni_supported(), avx2 = cpu::avx2::supported();
  const bool vnni = avx2 && cpu::avx2::avx_vnni_supported();
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K,
                     GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    for (const Shape& s : {Shape{"2048x2048", 2048, 2048}, Shape{"2048x5632", 2048, 5632}}) {
      for (int64_t tok : {1, 32}) {
        for (Impl impl : {Impl::kExact, Impl::kAvx512, Impl::kAvxVnni, Impl::kAvx2, Impl::kGeneric}) {
          if ((impl == Impl::kAvx512 && !avx512) || (impl == Impl::kAvxVnni && !vnni) || (impl == Impl::kAvx2 && !avx2))
            continue;
          if (impl == Impl::kGeneric && tok > 1) continue;
          if (s.n_in % ggml_type_traits(t).block_elems != 0) continue;
          static const char* const kNames[] = {"exact", "avx512", "avx-vnni", "avx2", "generic"};
          const std::string name = std::string(ggml_type_traits(t).name) + "/" + s.name + "/tokens:" +
                                   std::to_string(tok) + "/" + kNames[static_cast<int>(impl)];
          benchmark::RegisterBenchmark(name.c_str(), BM_KquantMatmul, t, s.n_out, s.n_in, tok, impl)
              ->Unit(benchmark::kMicrosecond);
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

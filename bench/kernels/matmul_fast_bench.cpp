// The fast matmul path (int8 activations, kernels/cpu/qdot.h) against the
// exact one (f32 activations) in one binary, single-threaded so a shared
// machine's load matters less: decode (1 token) and prefill tiles (32 and
// 512 tokens) at SmolLM2-135M's FFN shape (1536 x 576) and the 768 MiB
// example model's (5632 x 2048). items_per_second = weights x tokens (MACs).
// Each fast case runs on every ISA this CPU has (avx512-vnni, avx2 / avx-vnni,
// generic) so the ratio between them is measured side by side too; prefill
// also with AMX tiles (label amx where the CPU has them).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/bench_inputs.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/q4_1_packed.h"
#include "kernels/cpu/qdot.h"
#include "kernels/math/convert_row.h"

namespace layerstream::kernels {
namespace {

// isa: -1 = exact path, else a cpu::CpuIsa. packed: with the x16 Q4_1
// copy (MatmulParams::w_packed; decode on AVX-512 only).
void BM_Matmul(benchmark::State& state, GgmlType type, int64_t n_out, int64_t n_in, int64_t n_tok, int isa,
               bool packed = false) {
  const std::vector<uint8_t> w = random_weight(type, n_out, n_in);
  std::vector<float> x = uniform_floats(n_in * n_tok, 3), y(n_out * n_tok);
  MatmulParams p{w.data(), type, n_out, n_in, x.data(), n_tok, y.data()};
  std::vector<uint8_t> wp;
  if (packed) {
    wp.resize(w.size());
    cpu::q4_1x16::pack(w.data(), n_out, n_in, wp.data());
    p.w_packed = wp.data();
  }
  for (auto _ : state) {
    if (isa < 0) {
      cpu::matmul(p, nullptr);
    } else {
      cpu::matmul_fast(p, nullptr, static_cast<cpu::CpuIsa>(isa));
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n_out * n_in * n_tok);
  const bool amx = isa == int(cpu::CpuIsa::kAmx) && n_tok >= 16 && cpu::amx::supported() && cpu::amx::gemm_fn(type);
  state.SetLabel(isa < 0 ? "exact" : amx ? "amx" : packed ? "avx512-vnni x16" : cpu::quant_kernels(type, static_cast<cpu::CpuIsa>(isa)).isa);
}

int register_all() {
  struct Shape {
    const char* name;
    int64_t n_out, n_in;
  };
  const auto isa_name = [](int isa) {
    switch (isa) {
      case int(cpu::CpuIsa::kAmx): return "amx";
      case int(cpu::CpuIsa::kAvx512): return "avx512";
      case int(cpu::CpuIsa::kAvx2): return "avx2";
      case int(cpu::CpuIsa::kGeneric): return "generic";
      default: return "exact";
    }
  };
  const auto add = [&](GgmlType t, const Shape& s, int64_t tok, int isa) {
    const std::string name = std::string(ggml_type_traits(t).name) + "/" + s.name + "/tokens:" + std::to_string(tok) +
                             "/" + isa_name(isa);
    benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, t, s.n_out, s.n_in, tok, isa, false)->Unit(benchmark::kMicrosecond);
  };
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1}) {
    for (const Shape& s : {Shape{"1536x576", 1536, 576}, Shape{"5632x2048", 5632, 2048}}) {
      for (int64_t tok : {1, 32, 512}) {
        if (tok == 512 && s.n_out > 2000) continue;  // seconds per iteration
        for (int isa : {-1, int(cpu::CpuIsa::kAmx), int(cpu::CpuIsa::kAvx512), int(cpu::CpuIsa::kAvx2),
                        int(cpu::CpuIsa::kGeneric)}) {
          if (isa == int(cpu::CpuIsa::kGeneric) && tok > 1) continue;
          if (isa == int(cpu::CpuIsa::kAmx) && tok == 1) continue;  // AMX is for prefill only
          add(t, s, tok, isa);
        }
      }
    }
  }
  // The packed Q4_1 decode layout (q4_1_packed.h), where the CPU has it.
  // 92160x576: SmolLM2's 30 layers of Q4_1 FFN rows in one matrix (33 MiB,
  // out of L2: the rate the weights stream at in a real pass).
  for (const Shape& s : {Shape{"1536x576", 1536, 576}, Shape{"576x1536", 576, 1536}, Shape{"5632x2048", 5632, 2048},
                         Shape{"92160x576", 92160, 576}}) {
    if (!cpu::q4_1x16::available(s.n_out, s.n_in)) break;
    const std::string name = std::string("q4_1/") + s.name + "/tokens:1/avx512-x16";
    benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, GgmlType::Q4_1, s.n_out, s.n_in, int64_t{1},
                                 int(cpu::CpuIsa::kAvx512), true)
        ->Unit(benchmark::kMicrosecond);
    if (s.n_out == 576 || s.n_out == 92160) add(GgmlType::Q4_1, s, 1, int(cpu::CpuIsa::kAvx512));
  }
  // gemma-3-270m Q4_K_M's shapes: Q5_0 where the row (640) is no multiple of
  // 256, the K-quants on the 1024- and 2048-wide rows.
  for (GgmlType t : {GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const Shape s = t == GgmlType::Q5_0 ? Shape{"2048x640", 2048, 640} : Shape{"640x2048", 640, 2048};
    for (int64_t tok : {1, 32, 512})
      for (int isa : {-1, int(cpu::CpuIsa::kAmx), int(cpu::CpuIsa::kAvx512), int(cpu::CpuIsa::kAvx2)})
        if (isa != int(cpu::CpuIsa::kAmx) || tok > 1) add(t, s, tok, isa);
  }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace layerstream::kernels

BENCHMARK_MAIN();

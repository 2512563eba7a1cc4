// The fast matmul path (kernels/cpu/qdot.h, matmul_fast) on fresh random
// inputs, every implementation this CPU can run (generic, AVX2 pmaddubsw,
// AVX-VNNI, AVX-512 VNNI), so the AVX2 path a CPU without AVX-512 would take
// is checked here too.
//
// Tolerances (|got - ref|):
//   quantiser: every ISA gives the same bytes; |x - d q| <= d / 2 (+ f32
//     rounding), |q| <= 127, sum = sum(q), d = amax / 127.
//   gemm against float64 over the kernel's own quantised activations (d * q):
//     1e-5 * sum_i |w_i * xq_i| (Q4_0/Q4_1: 4e-5, their offset terms can
//     cancel). Only f32 rounding is allowed, so a wrong lane, block, scale or
//     offset fails.
//   against float64 over the original x: the above plus the quantisation
//     bound sum_i |w_i| * d_block(i) / 2.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/kquant_scales.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/q4_1_packed.h"
#include "kernels/cpu/qdot.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/math/kquant_blocks.h"
#include "runtime/device/inline_stream.h"
#include "tests/kernels/kernel_test_util.h"

namespace layerstream::kernels {
namespace {

using namespace testing;  // NOLINT: test file

std::vector<GgmlType> fast_types() {
  std::vector<GgmlType> out;
  for (GgmlType t : all_weight_types())
    if (cpu::has_quant_kernels(t)) out.push_back(t);
  return out;
}

// Every implementation this CPU runs that has a kernel for `type` (the
// SIMD ones may leave a type to the generic kernels).
std::vector<cpu::QuantKernels> implementations(GgmlType type) {
  std::vector<cpu::QuantKernels> impls = {cpu::generic::quant_kernels(type)};
  if (cpu::avx2::supported()) {
    impls.push_back(cpu::avx2::quant_kernels_no_vnni(type));
    if (cpu::avx2::avx_vnni_supported()) impls.push_back(cpu::avx2::quant_kernels(type));
  }
  if (cpu::avx512::vnni_supported()) impls.push_back(cpu::avx512::quant_kernels(type));
  std::erase_if(impls, [](const cpu::QuantKernels& k) { return k.gemm == nullptr; });
  return impls;
}

double gemm_tol(GgmlType t) { return t == GgmlType::Q8_0 ? 1e-5 : 4e-5; }

class CpuFastMatmulTest : public ::testing::Test {
 protected:
  void SetUp() override { rng_.seed(layerstream::testing::fresh_seed()); }
  std::mt19937_64 rng_;
  ThreadPool pool2_{2};
};

TEST_F(CpuFastMatmulTest, EveryIsaReachableOnThisCpuIsListed) {
  // Every block type has a fast path (at least the generic one).
  for (GgmlType t : all_weight_types()) EXPECT_EQ(cpu::has_quant_kernels(t), is_block_type(t)) << ggml_type_traits(t).name;
  // ... and a SIMD one on every ISA this CPU has (AVX2 pmaddubsw, AVX-VNNI,
  // AVX-512 VNNI), so GemmMatchesFloat64OnEveryTypeAndIsa checks each.
  for (GgmlType t : all_weight_types()) {
    if (!is_block_type(t)) continue;
    const char* name = ggml_type_traits(t).name;
    if (cpu::avx512::vnni_supported()) EXPECT_NE(cpu::avx512::quant_kernels(t).gemm, nullptr) << name;
    if (cpu::avx2::supported()) {
      EXPECT_NE(cpu::avx2::quant_kernels_no_vnni(t).gemm, nullptr) << name;
      EXPECT_NE(cpu::avx2::quant_kernels(t).gemm, nullptr) << name;
      EXPECT_NE(cpu::quant_kernels(t, cpu::CpuIsa::kAvx2).gemm, cpu::generic::quant_kernels(t).gemm) << name;
    }
  }
  const size_t n = implementations(GgmlType::Q8_0).size();
  if (cpu::avx512::vnni_supported()) {
    EXPECT_EQ(cpu::quant_kernels(GgmlType::Q8_0, cpu::CpuIsa::kAvx512).isa, std::string("avx512-vnni"));
    EXPECT_GE(n, 3u);
  }
  if (cpu::avx2::supported()) {
    const std::string forced = cpu::quant_kernels(GgmlType::Q8_0, cpu::CpuIsa::kAvx2).isa;
    EXPECT_TRUE(forced == "avx2" || forced == "avx-vnni") << forced;
  }
  EXPECT_EQ(cpu::quant_kernels(GgmlType::Q8_0, cpu::CpuIsa::kGeneric).isa, std::string("generic"));
  EXPECT_EQ(cpu::quant_kernels(GgmlType::F16).gemm, nullptr);
}

// The word-wise unpacking of Q4_K/Q5_K scales the fast kernels use gives
// k4_scale_min's values (the spec's decoding) on random packed bytes.
TEST_F(CpuFastMatmulTest, PackedKScalesUnpackAsTheSpecSays) {
  std::uniform_int_distribution<int> byte(0, 255);
  for (int rep = 0; rep < 2000; ++rep) {
    uint8_t packed[12], got[16];
    for (uint8_t& b : packed) b = static_cast<uint8_t>(byte(rng_));
    cpu::k4_unpack_scales(packed, got);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      math::k4_scale_min(packed, j, &sc, &m);
      ASSERT_EQ(got[j], sc) << "sub-block " << j;
      ASSERT_EQ(got[8 + j], m) << "sub-block " << j;
    }
  }
}

TEST_F(CpuFastMatmulTest, QuantiserIsExactToHalfAStepAndSameOnEveryIsa) {
  for (int64_t n : {32, 64, 96, 4128}) {
    std::vector<float> x = random_floats(n, rng_, -3.0f, 3.0f);
    for (int j = 0; j < 32; ++j) x[j] = 0.0f;  // an all-zero block: d = 0, q = 0
    if (n > 40) x[40] = 1e-30f;                   // a tiny value next to normal ones
    std::vector<cpu::QBlock> ref(n / 32);
    cpu::generic::quant_kernels(GgmlType::Q8_0).quantize(x.data(), n, ref.data());
    for (int64_t b = 0; b < n / 32; ++b) {
      double amax = 0;
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::fabs(double{x[b * 32 + j]}));
        ASSERT_LE(std::abs(ref[b].qs[j]), 127);
        sum += ref[b].qs[j];
        const double err = std::fabs(double{x[b * 32 + j]} - double{ref[b].d} * ref[b].qs[j]);
        ASSERT_LE(err, ref[b].d * (0.5 + 1e-5)) << "block " << b << " j " << j;
      }
      EXPECT_NEAR(ref[b].d, amax / 127, amax * 1e-6);
      EXPECT_EQ(ref[b].sum, sum);
    }
    for (const cpu::QuantKernels& k : implementations(GgmlType::Q8_0)) {
      std::vector<cpu::QBlock> got(n / 32);
      k.quantize(x.data(), n, got.data());
      for (int64_t b = 0; b < n / 32; ++b) {
        ASSERT_EQ(got[b].d, ref[b].d) << k.isa << " block " << b;
        ASSERT_EQ(got[b].sum, ref[b].sum) << k.isa << " block " << b;
        ASSERT_EQ(0, std::memcmp(got[b].qs, ref[b].qs, 32)) << k.isa << " block " << b;
      }
    }
  }
}

// Tiles around every kernel's R x T (1..9 rows, 1..9 tokens), odd and even
// block counts (the AVX-512 kernels take blocks in pairs), widths up to 4128.
TEST_F(CpuFastMatmulTest, GemmMatchesFloat64OnEveryTypeAndIsa) {
  struct Shape {
    int64_t rows, tokens, n;
  };
  const std::vector<Shape> shapes = {{1, 1, 32},  {1, 1, 64},  {3, 1, 96},   {4, 1, 544},  {5, 2, 32},
                                     {8, 4, 160}, {9, 5, 96},  {4, 9, 64},   {7, 3, 4128}, {2, 8, 1056},
                                     {1, 1, 256}, {5, 5, 512}, {9, 2, 1280}, {4, 4, 4096},
                                     // decode over many rows (Q8_0 reads them as 4 streams, plus n_rows % 4)
                                     {37, 1, 96}, {64, 1, 2048}, {131, 1, 160}};
  for (GgmlType type : fast_types()) {
    for (const Shape& s : shapes) {
      if (s.n % ggml_type_traits(type).block_elems != 0) continue;
      const Weight w = random_weight(type, s.rows, s.n, rng_);
      const std::vector<float> x = random_floats(s.n * s.tokens, rng_);
      const int64_t nb = s.n / 32;
      std::vector<cpu::QBlock> xq(nb * s.tokens);
      for (int64_t t = 0; t < s.tokens; ++t)
        cpu::generic::quant_kernels(type).quantize(x.data() + t * s.n, s.n, xq.data() + t * nb);
      // float64 over the quantised activations, and the quantisation bound.
      std::vector<double> xd(s.n * s.tokens), ref_q, abs_q, ref_x;
      for (int64_t t = 0; t < s.tokens; ++t)
        for (int64_t i = 0; i < s.n; ++i) xd[t * s.n + i] = double{xq[t * nb + i / 32].d} * xq[t * nb + i / 32].qs[i % 32];
      ref_matmul(w, xd, s.tokens, ref_q, &abs_q);
      ref_matmul(w, to_double(x), s.tokens, ref_x);
      std::vector<double> qbound(s.rows * s.tokens, 0.0);
      for (int64_t t = 0; t < s.tokens; ++t)
        for (int64_t r = 0; r < s.rows; ++r)
          for (int64_t i = 0; i < s.n; ++i)
            qbound[t * s.rows + r] += std::fabs(w.exact[r * s.n + i]) * xq[t * nb + i / 32].d * 0.5;

      const uint64_t row_bytes = ggml_row_bytes(ggml_type_traits(type), s.n);
      for (const cpu::QuantKernels& k : implementations(type)) {
        // ldy wider than rows: the kernels must write only their tile.
        const int64_t ldy = s.rows + 3;
        std::vector<float> y = poisoned(ldy * s.tokens);
        k.gemm(w.bytes.data(), row_bytes, s.rows, xq.data(), s.tokens, s.n, y.data(), ldy);
        for (int64_t t = 0; t < s.tokens; ++t) {
          for (int64_t r = 0; r < s.rows; ++r) {
            const double got = y[t * ldy + r], i = t * s.rows + r;
            const double tight = gemm_tol(type) * abs_q[i];
            ASSERT_LE(std::fabs(got - ref_q[i]), tight) << ggml_type_traits(type).name << " " << k.isa << " rows "
                                                         << s.rows << " tokens " << s.tokens << " n " << s.n
                                                         << " r " << r << " t " << t;
            ASSERT_LE(std::fabs(got - ref_x[i]), tight + qbound[i]) << ggml_type_traits(type).name << " " << k.isa;
          }
          for (int64_t r = s.rows; r < ldy; ++r) ASSERT_TRUE(std::isnan(y[t * ldy + r])) << "wrote outside its tile";
        }
      }
    }
  }
}

// The AMX tile GEMM (16 tokens x 16 rows per tile, weights repacked per
// call) against float64 over its quantised activations, with the same
// tolerance as the VNNI kernels: partial panels (rows % 16), token counts
// with a remainder (n_tok % 16, left to the VNNI kernel), 1 to 48 blocks.
TEST_F(CpuFastMatmulTest, AmxGemmMatchesFloat64) {
  if (!cpu::amx::supported()) GTEST_SKIP() << "this CPU (or OS) has no AMX-INT8 tiles; the VNNI kernels serve prefill";
  struct Shape {
    int64_t rows, tokens, n;
  };
  const std::vector<Shape> shapes = {{16, 16, 32}, {37, 35, 96}, {70, 48, 576}, {130, 21, 1536}, {5, 17, 64},
                                     {64, 32, 64}, {1, 16, 32},  {20, 33, 512}, {50, 16, 2048}};
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const cpu::QGemmFn amx = cpu::amx::gemm_fn(type);
    ASSERT_NE(amx, nullptr) << ggml_type_traits(type).name;
    for (const Shape& s : shapes) {
      if (s.n % ggml_type_traits(type).block_elems != 0) continue;
      const Weight w = random_weight(type, s.rows, s.n, rng_);
      const std::vector<float> x = random_floats(s.n * s.tokens, rng_, -2.0f, 2.0f);
      const int64_t nb = s.n / 32;
      std::vector<cpu::QBlock> xq(nb * s.tokens);
      for (int64_t t = 0; t < s.tokens; ++t)
        cpu::generic::quant_kernels(type).quantize(x.data() + t * s.n, s.n, xq.data() + t * nb);
      std::vector<double> xd(s.n * s.tokens), ref_q, abs_q;
      for (int64_t t = 0; t < s.tokens; ++t)
        for (int64_t i = 0; i < s.n; ++i) xd[t * s.n + i] = double{xq[t * nb + i / 32].d} * xq[t * nb + i / 32].qs[i % 32];
      ref_matmul(w, xd, s.tokens, ref_q, &abs_q);
      const int64_t ldy = s.rows + 3;
      std::vector<float> y = poisoned(ldy * s.tokens);
      amx(w.bytes.data(), ggml_row_bytes(ggml_type_traits(type), s.n), s.rows, xq.data(), s.tokens, s.n, y.data(), ldy);
      for (int64_t t = 0; t < s.tokens; ++t) {
        for (int64_t r = 0; r < s.rows; ++r) {
          const int64_t i = t * s.rows + r;
          ASSERT_LE(std::fabs(y[t * ldy + r] - ref_q[i]), gemm_tol(type) * abs_q[i])
              << ggml_type_traits(type).name << " rows " << s.rows << " tokens " << s.tokens << " n " << s.n << " r "
              << r << " t " << t;
        }
        for (int64_t r = s.rows; r < ldy; ++r) ASSERT_TRUE(std::isnan(y[t * ldy + r])) << "wrote outside its tile";
      }
    }
  }
}

// AMX forced on (kAmx) and off (kAvx512) through matmul_fast on the same
// prefill: both within f32 rounding of each other (the same integer block
// sums, scaled in the same order); where the CPU lacks AMX, kAmx must fall
// back to exactly the VNNI result.
TEST_F(CpuFastMatmulTest, AmxForcedOnAndOffAgree) {
  if (!cpu::avx512::vnni_supported()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU: neither path to compare";
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const int64_t n_out = 200, n_in = 768, n_tok = 40;
    const Weight w = random_weight(type, n_out, n_in, rng_);
    const std::vector<float> x = random_floats(n_in * n_tok, rng_);
    std::vector<double> ref, abs_sum;
    ref_matmul(w, to_double(x), n_tok, ref, &abs_sum);
    std::vector<float> on = poisoned(n_out * n_tok), off = poisoned(n_out * n_tok);
    MatmulParams p{w.bytes.data(), type, n_out, n_in, x.data(), n_tok, on.data()};
    cpu::matmul_fast(p, &pool2_, cpu::CpuIsa::kAmx);
    p.y = off.data();
    cpu::matmul_fast(p, &pool2_, cpu::CpuIsa::kAvx512);
    for (size_t i = 0; i < on.size(); ++i) {
      if (cpu::amx::supported()) {
        ASSERT_LE(std::fabs(on[i] - off[i]), 2e-5 * abs_sum[i]) << ggml_type_traits(type).name << " i=" << i;
      } else {
        ASSERT_EQ(on[i], off[i]) << "kAmx without AMX must be the VNNI path";
      }
    }
  }
}

// matmul_fast end to end (quantise, split rows over a pool, GEMM blocking)
// on each forced ISA: int8 types within the quantisation bound (plus f32
// rounding) of float64 over the original x; float types (the f32 GEMM for
// several tokens, the exact kernels for one) within f32 rounding: 1e-5 *
// sum |w x| as the exact path's test.
TEST_F(CpuFastMatmulTest, MatmulFastAgreesWithExactPathOnEveryForcedIsa) {
  const std::vector<MatmulShape> shapes = {{1, 32, 1},     {67, 96, 1},   {130, 320, 5}, {200, 576, 37},
                                     {9, 4128, 2},   {33, 256, 1},  {70, 768, 6},  {6, 17, 5}};
  for_each_matmul_case(shapes, rng_, [&](GgmlType type, const MatmulShape& s, const Weight& w,
                                         const std::vector<float>& x) {
    std::vector<float> exact = poisoned(s.n_out * s.n_tok);
    MatmulParams p{w.bytes.data(), type, s.n_out, s.n_in, x.data(), s.n_tok, exact.data()};
    LS_ASSERT_OK(validate(p));
    cpu::matmul(p, &pool2_);
    std::vector<double> ref, abs_sum;
    ref_matmul(w, to_double(x), s.n_tok, ref, &abs_sum);
    // Quantisation bound per output: sum_i |w_i| * amax(block of x) / 254.
    std::vector<double> bound(s.n_out * s.n_tok, 0.0);
    for (int64_t t = 0; t < s.n_tok; ++t)
      for (int64_t b = 0; b < s.n_in / 32; ++b) {
        double amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double{x[t * s.n_in + b * 32 + j]}));
        for (int64_t o = 0; o < s.n_out; ++o)
          for (int j = 0; j < 32; ++j)
            bound[t * s.n_out + o] += std::fabs(w.exact[o * s.n_in + b * 32 + j]) * amax / 254 * 1.001;
      }
    for (cpu::CpuIsa isa : {cpu::CpuIsa::kAuto, cpu::CpuIsa::kAmx, cpu::CpuIsa::kAvx512, cpu::CpuIsa::kAvx2,
                            cpu::CpuIsa::kGeneric}) {
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2_}) {
        std::vector<float> y = poisoned(s.n_out * s.n_tok);
        p.y = y.data();
        cpu::matmul_fast(p, pool, isa);
        for (size_t i = 0; i < y.size(); ++i) {
          if (!cpu::has_quant_kernels(type)) {
            ASSERT_LE(std::fabs(y[i] - ref[i]), 1e-5 * abs_sum[i])
                << ggml_type_traits(type).name << " isa " << static_cast<int>(isa) << " " << s.n_out << "x" << s.n_in
                << " tokens " << s.n_tok << " i=" << i;
          } else {
            ASSERT_LE(std::fabs(double{y[i]} - exact[i]), bound[i] + 5e-5 * abs_sum[i]) << "against the exact path";
            ASSERT_LE(std::fabs(y[i] - ref[i]), bound[i] + 4e-5 * abs_sum[i])
                << ggml_type_traits(type).name << " isa " << static_cast<int>(isa) << " " << s.n_out << "x"
                << s.n_in << " tokens " << s.n_tok << " i=" << i;
          }
        }
      }
    }
  });
}

// Batch invariance (kernels.h): a pass of 2..kBatchInvariantTokens tokens
// gives each token the bits of its own one-token product, on the fast path
// (every forced ISA, the x16 Q4_1 kernels with and without the packed copy)
// and the exact path, every weight type, with and without the pool. The
// float64 checks above cover the values; this covers the bits speculative
// verification relies on.
TEST_F(CpuFastMatmulTest, SmallPassesGiveEachTokenItsOneTokenBits) {
  const std::vector<MatmulShape> shapes = {{67, 96, kBatchInvariantTokens}, {576, 576, 5}, {130, 256, 2}};
  for_each_matmul_case(shapes, rng_, [&](GgmlType type, const MatmulShape& s, const Weight& w,
                                         const std::vector<float>& x) {
    std::vector<uint8_t> packed;
    if (type == GgmlType::Q4_1 && cpu::q4_1x16::available(s.n_out, s.n_in)) {
      packed.resize(w.bytes.size());
      cpu::q4_1x16::pack(w.bytes.data(), s.n_out, s.n_in, packed.data());
    }
    for (int isa_i = -1; isa_i < 4; ++isa_i) {  // -1: the exact path
      const cpu::CpuIsa isa = isa_i < 0 ? cpu::CpuIsa::kAuto
                                        : std::array{cpu::CpuIsa::kAuto, cpu::CpuIsa::kAvx512, cpu::CpuIsa::kAvx2,
                                                     cpu::CpuIsa::kGeneric}[isa_i];
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2_}) {
        const auto run = [&](const float* xs, int64_t n_tok, float* y) {
          MatmulParams p{w.bytes.data(), type, s.n_out, s.n_in, xs, n_tok, y};
          p.w_packed = packed.empty() ? nullptr : packed.data();
          if (isa_i < 0) {
            cpu::matmul(p, pool);
          } else {
            cpu::matmul_fast(p, pool, isa);
          }
        };
        std::vector<float> pass = poisoned(s.n_out * s.n_tok), one = poisoned(s.n_out);
        run(x.data(), s.n_tok, pass.data());
        for (int64_t t = 0; t < s.n_tok; ++t) {
          run(x.data() + t * s.n_in, 1, one.data());
          for (int64_t o = 0; o < s.n_out; ++o)
            ASSERT_EQ(std::bit_cast<uint32_t>(pass[t * s.n_out + o]), std::bit_cast<uint32_t>(one[o]))
                << ggml_type_traits(type).name << (isa_i < 0 ? " exact" : " fast isa ") << isa_i << " " << s.n_out
                << "x" << s.n_in << " token " << t << " of " << s.n_tok << " row " << o
                << (pool ? " pool" : " inline");
        }
      }
    }
  });
}

// matmul_fast_group (Q/K/V, gate/up in one call): the same bytes as one
// matmul_fast per matrix, whether fused (decode of fast types: one
// quantisation, one pool job whose chunks may span two matrices) or not
// (several tokens, or a type without a fast path in the group), with and
// without a pool, on every forced ISA. Shapes: row counts off the 4-row
// groups, and sizes on both sides of the 32 KiB inline threshold.
TEST_F(CpuFastMatmulTest, GroupedMatmulsEqualOneMatmulEach) {
  struct Case {
    std::vector<GgmlType> types;
    std::vector<int64_t> n_out;
    int64_t n_in, n_tok;
  };
  const std::vector<Case> cases = {
      {{GgmlType::Q4_1, GgmlType::Q4_1, GgmlType::Q4_1}, {576, 190, 193}, 576, 1},
      {{GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1}, {7, 33, 5}, 64, 1},
      {{GgmlType::Q5_0, GgmlType::Q8_0}, {1537, 1536}, 640, 1},
      {{GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_1}, {130, 67, 64}, 256, 1},
      {{GgmlType::Q4_1, GgmlType::F16}, {70, 70}, 96, 1},  // F16: no fast path, not fused
      {{GgmlType::Q4_1, GgmlType::Q8_0}, {130, 70}, 320, 3},
  };
  for (const Case& c : cases) {
    const int n = static_cast<int>(c.types.size());
    const std::vector<float> x = random_floats(c.n_in * c.n_tok, rng_);
    std::vector<Weight> ws;
    std::vector<std::vector<float>> want(n), got(n);
    for (int i = 0; i < n; ++i) ws.push_back(random_weight(c.types[i], c.n_out[i], c.n_in, rng_));
    for (cpu::CpuIsa isa : {cpu::CpuIsa::kAuto, cpu::CpuIsa::kAvx512, cpu::CpuIsa::kAvx2, cpu::CpuIsa::kGeneric}) {
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2_}) {
        std::vector<MatmulParams> ps(n);
        for (int i = 0; i < n; ++i) {
          want[i] = poisoned(c.n_out[i] * c.n_tok);
          got[i] = poisoned(c.n_out[i] * c.n_tok);
          ps[i] = {ws[i].bytes.data(), c.types[i], c.n_out[i], c.n_in, x.data(), c.n_tok, want[i].data()};
          LS_ASSERT_OK(validate(ps[i]));
          cpu::matmul_fast(ps[i], pool, isa);
          ps[i].y = got[i].data();
        }
        cpu::matmul_fast_group(ps.data(), n, pool, isa);
        for (int i = 0; i < n; ++i)
          for (size_t j = 0; j < got[i].size(); ++j)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i][j]), std::bit_cast<uint32_t>(want[i][j]))
                << "matrix " << i << " (" << ggml_type_traits(c.types[i]).name << ") row " << j << " isa "
                << static_cast<int>(isa) << (pool ? " pool" : " inline");
      }
    }
  }
}

// The x16 Q4_1 decode layout (q4_1_packed.h): the packed kernel against
// float64 over its quantised activations (the gemm tolerance) on row counts
// with and without a tail past the last group of 16, odd block counts, and
// row ranges starting inside the matrix, and the same bits from the GGUF
// rows (gemv_gguf); then through matmul_fast / matmul_fast_group with and
// without MatmulParams::w_packed, with and without the pool: the copy
// changes no bit (on AVX-512 both are the x16 products, elsewhere it is not
// read), and a pass of more tokens than kBatchInvariantTokens gives each
// token its one-token bits, with or without it.
TEST_F(CpuFastMatmulTest, PackedQ4_1MatchesFloat64AndIsIgnoredWhereItCannotRun) {
  if (!cpu::q4_1x16::available(16, 32)) GTEST_SKIP() << "no AVX-512 VNNI on this CPU: the x16 layout is not used";
  struct Shape {
    int64_t rows, n;
  };
  for (const Shape& s : {Shape{16, 32}, Shape{40, 96}, Shape{33, 576}, Shape{64, 1056}, Shape{200, 1536}}) {
    const Weight w = random_weight(GgmlType::Q4_1, s.rows, s.n, rng_);
    std::vector<uint8_t> packed(w.bytes.size());
    cpu::q4_1x16::pack(w.bytes.data(), s.rows, s.n, packed.data());
    const std::vector<float> x = random_floats(s.n, rng_);
    const int64_t nb = s.n / 32;
    std::vector<cpu::QBlock> xq(nb);
    cpu::generic::quant_kernels(GgmlType::Q4_1).quantize(x.data(), s.n, xq.data());
    std::vector<double> xd(s.n), ref_q, abs_q;
    for (int64_t i = 0; i < s.n; ++i) xd[i] = double{xq[i / 32].d} * xq[i / 32].qs[i % 32];
    ref_matmul(w, xd, 1, ref_q, &abs_q);
    for (int64_t r0 : {int64_t{0}, int64_t{16}}) {
      if (r0 >= s.rows) continue;
      std::vector<float> y = poisoned(s.rows + 3);
      cpu::q4_1x16::gemv(packed.data(), s.rows, s.n, r0, s.rows, xq.data(), y.data());
      for (int64_t r = r0; r < s.rows; ++r)
        ASSERT_LE(std::fabs(y[r - r0] - ref_q[r]), gemm_tol(GgmlType::Q4_1) * abs_q[r])
            << "rows " << s.rows << " n " << s.n << " from " << r0 << " row " << r;
      for (int64_t r = s.rows - r0; r < s.rows + 3; ++r) ASSERT_TRUE(std::isnan(y[r])) << "wrote past its rows";
      // From the GGUF rows: the same bits (what keeps streamed == resident).
      std::vector<float> g = poisoned(s.rows + 3);
      cpu::q4_1x16::gemv_gguf(w.bytes.data() + r0 * (s.n / 32) * 20, s.rows - r0, s.n, xq.data(), g.data());
      for (int64_t r = 0; r < s.rows + 3; ++r)
        ASSERT_EQ(std::bit_cast<uint32_t>(g[r]), std::bit_cast<uint32_t>(y[r])) << "rows " << s.rows << " from " << r0
                                                                                << " row " << r0 + r;
    }
    std::vector<float> full(s.rows);
    cpu::q4_1x16::gemv(packed.data(), s.rows, s.n, 0, s.rows, xq.data(), full.data());
    const auto y_ref = [&](int64_t r) { return full[r]; };
    // Through the matmul, with and without the packed copy, alone and grouped.
    for (cpu::CpuIsa isa : {cpu::CpuIsa::kAuto, cpu::CpuIsa::kAvx512, cpu::CpuIsa::kAvx2, cpu::CpuIsa::kGeneric}) {
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2_}) {
        std::vector<float> plain = poisoned(s.rows), with = poisoned(s.rows), grouped = poisoned(s.rows),
                           second = poisoned(s.rows);
        MatmulParams p{w.bytes.data(), GgmlType::Q4_1, s.rows, s.n, x.data(), 1, plain.data()};
        cpu::matmul_fast(p, pool, isa);
        p.w_packed = packed.data();
        p.y = with.data();
        cpu::matmul_fast(p, pool, isa);
        MatmulParams pair[2] = {p, p};
        pair[0].y = grouped.data();
        pair[1].y = second.data();
        pair[1].w_packed = nullptr;
        cpu::matmul_fast_group(pair, 2, pool, isa);
        // The packed copy changes no bit on any ISA (on AVX-512 both run
        // the x16 products; elsewhere the copy is not read).
        const bool x16 = isa == cpu::CpuIsa::kAuto || isa == cpu::CpuIsa::kAvx512;
        for (int64_t r = 0; r < s.rows; ++r) {
          if (x16) ASSERT_EQ(std::bit_cast<uint32_t>(with[r]), std::bit_cast<uint32_t>(y_ref(r))) << "row " << r;
          ASSERT_EQ(std::bit_cast<uint32_t>(with[r]), std::bit_cast<uint32_t>(plain[r])) << "row " << r;
          ASSERT_EQ(std::bit_cast<uint32_t>(grouped[r]), std::bit_cast<uint32_t>(with[r])) << "row " << r;
          ASSERT_EQ(std::bit_cast<uint32_t>(second[r]), std::bit_cast<uint32_t>(plain[r])) << "row " << r;
        }
      }
    }
    // A prefill-sized pass (more tokens than a verification carries, fewer
    // than AMX's 16): with and without the packed copy, each token gets its
    // one-token bits (the prefix cache reuses KV that one-token passes wrote
    // as if a prefill had written it).
    constexpr int64_t kTok = kBatchInvariantTokens + 5;
    const std::vector<float> x3 = random_floats(kTok * s.n, rng_);
    std::vector<float> a = poisoned(kTok * s.rows), b = poisoned(kTok * s.rows), one = poisoned(s.rows);
    MatmulParams p{w.bytes.data(), GgmlType::Q4_1, s.rows, s.n, x3.data(), kTok, a.data()};
    cpu::matmul_fast(p, &pool2_);
    p.w_packed = packed.data();
    p.y = b.data();
    cpu::matmul_fast(p, &pool2_);
    for (int64_t t = 0; t < kTok; ++t) {
      MatmulParams p1{w.bytes.data(), GgmlType::Q4_1, s.rows, s.n, x3.data() + t * s.n, 1, one.data()};
      cpu::matmul_fast(p1, &pool2_);
      for (int64_t r = 0; r < s.rows; ++r) {
        ASSERT_EQ(std::bit_cast<uint32_t>(a[t * s.rows + r]), std::bit_cast<uint32_t>(one[r])) << "token " << t;
        ASSERT_EQ(std::bit_cast<uint32_t>(b[t * s.rows + r]), std::bit_cast<uint32_t>(one[r])) << "token " << t;
      }
    }
  }
}

// CpuKernels' packing API: which matrices have a packed layout, the packing
// through the stream equal to q4_1x16::pack, and a clear error otherwise.
TEST_F(CpuFastMatmulTest, CpuKernelsPackQ4_1OnlyOnTheFastPath) {
  CpuKernels fast(1), exact(1, true);
  InlineStream stream;
  EXPECT_EQ(exact.packed_weight_bytes(GgmlType::Q4_1, 64, 576), 0u);
  EXPECT_EQ(fast.packed_weight_bytes(GgmlType::Q8_0, 64, 576), 0u);
  if (!cpu::q4_1x16::available(64, 576)) {
    EXPECT_EQ(fast.packed_weight_bytes(GgmlType::Q4_1, 64, 576), 0u);
    GTEST_SKIP() << "no AVX-512 VNNI on this CPU: no packed layout";
  }
  const uint64_t bytes = fast.packed_weight_bytes(GgmlType::Q4_1, 40, 576);
  ASSERT_EQ(bytes, 40u * 18 * 20);
  const Weight w = random_weight(GgmlType::Q4_1, 40, 576, rng_);
  std::vector<uint8_t> got(bytes), want(bytes);
  MatmulParams p{w.bytes.data(), GgmlType::Q4_1, 40, 576};
  LS_ASSERT_OK(fast.pack_weight(p, got.data(), stream));
  LS_ASSERT_OK(stream.synchronize());
  cpu::q4_1x16::pack(w.bytes.data(), 40, 576, want.data());
  EXPECT_EQ(got, want);
  EXPECT_NE(got, w.bytes);  // the first 32 rows are interleaved
  const Status bad = exact.pack_weight(p, got.data(), stream);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("exact path"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace layerstream::kernels

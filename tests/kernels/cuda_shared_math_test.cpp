// Host checks of the math the CUDA kernels share with the CPU (issue 20):
// the greedy argmax rule (defect 4: NaN never chosen, the CPU and CUDA
// samplers agree) and the per-row FP16 scaling exponent of the prefill GEMM
// (defect 1: |x| >= 65520 must not round to inf), and the quarter-block
// decoding of the coalesced CUDA matvec (defect 6). The CUDA side of these
// runs in test_kernels_cuda (GPU suite).
#include <cmath>
#include <limits>
#include <random>

#include "kernels/math/argmax.h"
#include "kernels/math/f16_scaling.h"
#include "kernels/math/fp16.h"
#include "kernels/math/quant_quarter.h"
#include "tests/kernels/kernel_test_util.h"

namespace layerstream::kernels {
namespace {

using namespace testing;  // NOLINT: test file

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The rule folded over a vector, as both samplers use it.
int64_t fold_argmax(const std::vector<float>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  int64_t bi = n;
  float bv = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (math::argmax_better(v[i], i, bv, bi, n)) {
      bv = v[i];
      bi = i;
    }
  }
  return bi;
}

TEST(ArgmaxRule, NaNIsNeverChosenAndNeverHidesACandidate) {
  EXPECT_EQ(fold_argmax({kNaN, 1.0f, 3.0f, 2.0f}), 2);
  EXPECT_EQ(fold_argmax({kNaN, kNaN}), 2);  // "none": the caller picks token 0
  EXPECT_EQ(fold_argmax({-INFINITY, kNaN, -INFINITY}), 0);
  EXPECT_EQ(fold_argmax({1.0f, 5.0f, 5.0f, kNaN}), 1);  // lowest index on ties
  // Merging two partial results as the CUDA tree reduction does: a side
  // that saw only NaN ("none") never replaces, and is always replaced.
  EXPECT_FALSE(math::argmax_better(kNaN, 3, 1.0f, 7, 100));
  EXPECT_FALSE(math::argmax_better(9.0f, 100, 1.0f, 7, 100));
  EXPECT_TRUE(math::argmax_better(-1e30f, 9, 0.0f, 100, 100));
}

TEST(ArgmaxRule, CpuGreedySamplerSkipsNaN) {
  std::mt19937_64 rng(layerstream::testing::fresh_seed());
  std::vector<float> logits = random_floats(5000, rng, -5, 5);
  logits[0] = kNaN;  // the old CPU loop compared everything against logits[0]
  logits[1234] = 9.0f;
  for (int i = 0; i < 20; ++i) logits[2000 + rng() % 3000] = kNaN;
  auto cpu = make_kernels(BackendKind::kHost);
  ASSERT_TRUE(cpu.ok());
  InlineStream s;
  int32_t tok = -1;
  LS_ASSERT_OK((*cpu)->sample({logits.data(), 5000, 0.0f, 0, 1.0f, 1, &tok}, s));
  EXPECT_EQ(tok, 1234);
  std::fill(logits.begin(), logits.end(), kNaN);
  LS_ASSERT_OK((*cpu)->sample({logits.data(), 5000, 0.0f, 0, 1.0f, 1, &tok}, s));
  EXPECT_EQ(tok, 0);
}

// ranks_before is a strict weak order on rows with NaNs (irreflexive,
// asymmetric, transitive), NaN ranks after every number, and the CPU
// sampler's top-k draw never returns a NaN's index.
TEST(ArgmaxRule, RankingIsAStrictWeakOrderWithNaN) {
  std::mt19937_64 rng(layerstream::testing::fresh_seed());
  std::vector<float> v = random_floats(60, rng, -2, 2);
  for (int i = 0; i < 20; ++i) v[rng() % v.size()] = kNaN;
  for (int i = 0; i < 10; ++i) v[rng() % v.size()] = v[rng() % v.size()];
  const int64_t n = static_cast<int64_t>(v.size());
  auto before = [&](int64_t a, int64_t b) { return math::ranks_before(v[a], a, v[b], b); };
  for (int64_t a = 0; a < n; ++a) {
    EXPECT_FALSE(before(a, a));
    for (int64_t b = 0; b < n; ++b) {
      if (a != b) EXPECT_NE(before(a, b), before(b, a)) << a << " " << b;  // ids make it total
      if (std::isnan(v[b]) && !std::isnan(v[a])) EXPECT_TRUE(before(a, b));
      for (int64_t c = 0; c < n; ++c)
        if (before(a, b) && before(b, c)) EXPECT_TRUE(before(a, c)) << a << " " << b << " " << c;
    }
  }
  auto cpu = make_kernels(BackendKind::kHost);
  ASSERT_TRUE(cpu.ok());
  InlineStream s;
  std::vector<float> row = random_floats(64, rng, -1, 1);
  for (size_t i = 0; i < row.size(); i += 2) row[i] = kNaN;  // 32 numbers, top-k 48 reaches the NaNs
  for (uint64_t seed = 0; seed < 200; ++seed) {
    int32_t tok = -1;
    LS_ASSERT_OK((*cpu)->sample({row.data(), 64, 1.0f, 48, 1.0f, seed, &tok}, s));
    ASSERT_FALSE(std::isnan(row[tok])) << "seed " << seed << " drew NaN id " << tok;
  }
}

TEST(F16RowScaling, LargestElementLandsInRangeAndStaysFinite) {
  std::mt19937_64 rng(layerstream::testing::fresh_seed());
  std::uniform_real_distribution<double> log10(-30, 30);
  for (int i = 0; i < 2000; ++i) {
    const float m = static_cast<float>(std::pow(10.0, log10(rng)));
    const int e = math::f16_row_exponent(m);
    const float scaled = std::ldexp(m, -e);
    ASSERT_GE(scaled, 16384.0f) << m;
    ASSERT_LT(scaled, 32768.0f) << m;
    ASSERT_TRUE(std::isfinite(math::f16_to_f32(math::f32_to_f16(scaled)))) << m;
  }
  // The values that overflowed unscaled.
  for (float m : {65520.0f, 1e5f, 1e6f, 3e38f}) {
    ASSERT_TRUE(std::isinf(math::f16_to_f32(math::f32_to_f16(m)))) << "premise: unscaled " << m << " overflows";
    const int e = math::f16_row_exponent(m);
    EXPECT_TRUE(std::isfinite(math::f16_to_f32(math::f32_to_f16(std::ldexp(m, -e))))) << m;
    // An element 1e-6 of the row's largest keeps FP16's relative precision.
    const float small = std::ldexp(m * 1e-6f, -e);
    const float back = math::f16_to_f32(math::f32_to_f16(small));
    EXPECT_LE(std::fabs(back - small), std::ldexp(small, -11)) << m;
  }
  EXPECT_EQ(math::f16_row_exponent(0.0f), 0);
  EXPECT_EQ(math::f16_row_exponent(INFINITY), 0);
  EXPECT_EQ(math::f16_row_exponent(kNaN), 0);
}

// Each quarter decodes exactly the block decoder's values of its elements,
// the four quarters cover the block once, and the activation runs the kernel
// reads (two float4) are those elements.
template <typename Block>
void check_quarters(GgmlType type, std::mt19937_64& rng) {
  for (int rep = 0; rep < 200; ++rep) {
    const std::vector<float> src = random_floats(math::kQK, rng, -3, 3);
    Block b;
    ASSERT_TRUE(math::encode_row(type, src.data(), math::kQK, &b).ok());
    float full[math::kQK];
    math::dequantize_block(b, full);
    std::vector<int> seen(math::kQK, 0);
    for (int k = 0; k < 4; ++k) {
      float w[math::kQuarterElems];
      math::decode_quarter(b, k, w);
      for (int j = 0; j < math::kQuarterElems; ++j) {
        const int e = type == GgmlType::Q8_0 ? math::q8_0_quarter_element(k, j) : math::q4_quarter_element(k, j);
        const int run = math::quarter_x_run(static_cast<const Block*>(nullptr), k, j / 4) + j % 4;
        ASSERT_EQ(run, e) << "quarter " << k << " position " << j;
        ASSERT_EQ(w[j], full[e]) << "quarter " << k << " position " << j;
        ++seen[e];
      }
    }
    for (int e = 0; e < math::kQK; ++e) ASSERT_EQ(seen[e], 1) << "element " << e;
  }
}

TEST(QuantQuarters, DecodeExactlyAndCoverTheBlockOnce) {
  std::mt19937_64 rng(layerstream::testing::fresh_seed());
  check_quarters<math::BlockQ8_0>(GgmlType::Q8_0, rng);
  check_quarters<math::BlockQ4_0>(GgmlType::Q4_0, rng);
  check_quarters<math::BlockQ4_1>(GgmlType::Q4_1, rng);
}

}  // namespace
}  // namespace layerstream::kernels

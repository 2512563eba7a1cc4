// f16/bf16 conversions against float64 references written from the IEEE
// definitions, exhaustively over all 65536 bit patterns where feasible.
#include "kernels/math/fp16.h"

#include <cmath>
#include <limits>

#include "tests/common/testing.h"

namespace layerstream::math {
namespace {

// binary16 bits -> value, from the definition.
double f16_reference(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int e = (h >> 10) & 31;
  const int m = h & 1023;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

TEST(Fp16, DecodesEveryBitPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double ref = f16_reference(static_cast<uint16_t>(h));
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), ref) << "bits " << h;
      ASSERT_EQ(std::signbit(got), std::signbit(ref)) << h;
    }
  }
}

TEST(Fp16, EncodeRoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if (std::isnan(f16_reference(static_cast<uint16_t>(h)))) continue;
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(Fp16, EncodeRoundsToNearestEven) {
  std::mt19937_64 rng(testing::fresh_seed());
  std::uniform_real_distribution<float> mag(-30.0f, 17.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(1.0f + static_cast<float>(rng() % 1000000) / 1e6f, static_cast<int>(mag(rng))) *
                    ((rng() & 1) ? -1.0f : 1.0f);
    const uint16_t h = f32_to_f16(x);
    const double got = f16_reference(h);
    if (std::fabs(x) >= 65520.0) {
      ASSERT_TRUE(std::isinf(got)) << x;
      continue;
    }
    // No other finite half is strictly closer; on a tie the even mantissa wins.
    for (int delta : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + delta);
      const double other = f16_reference(n);
      if (std::isnan(other) || std::isinf(other) || (n & 0x7FFF) == 0x7FFF || ((h ^ n) & 0x8000)) continue;
      const double dg = std::fabs(got - x), dn = std::fabs(other - x);
      ASSERT_LE(dg, dn) << "x=" << x << " h=" << h;
      if (dg == dn) ASSERT_EQ(h & 1, 0) << "tie not to even for " << x;
    }
  }
}

TEST(Bf16, DecodeAndRoundToNearestEven) {
  for (uint32_t h = 0; h < 65536; h += 7) {
    const float v = bf16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(v)) ASSERT_EQ(f32_to_bf16(v), h);
  }
  std::mt19937_64 rng(testing::fresh_seed());
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng()) & 0x7F7FFFFFu;  // finite
    const float x = f32_from_bits(bits);
    const double got = bf16_to_f32(f32_to_bf16(x));
    const double lo = f32_from_bits(bits & 0xFFFF0000u);
    // The next bf16 up, computed in double so that rounding past the largest
    // finite bf16 gives a value that we then map to infinity.
    const int exp = static_cast<int>((bits >> 23) & 0xFF);
    const double ulp = std::ldexp(1.0, (exp == 0 ? 1 : exp) - 127 - 7);
    const double hi = lo + ulp;
    double expect = (x - lo < hi - x) ? lo : (x - lo > hi - x) ? hi : (((bits >> 16) & 1) ? hi : lo);
    if (expect > 3.3895313892515355e38) expect = INFINITY;
    ASSERT_EQ(got, expect) << bits;
  }
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace layerstream::math

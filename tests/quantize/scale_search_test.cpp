// The scale searches (kernels/math/scale_search.h) against brute force on
// random groups: each result is the least-squares scale of its codes, no
// worse than the plain absmax / range fit, and the codes stay in range.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/math/kquant_blocks.h"
#include "kernels/math/scale_search.h"
#include "tests/common/testing.h"

namespace layerstream::math {
namespace {

class ScaleSearch : public ::testing::Test {
 protected:
  void SetUp() override { rng_.seed(layerstream::testing::fresh_seed()); }
  std::vector<float> group(int n, float sd = 1.0f) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = d(rng_);
    return x;
  }
  std::mt19937_64 rng_;
};

// The searches pick among candidates by float sums whose difference is the
// (small) error: a candidate within float rounding of sum w x^2 of the best
// may win. Comparisons allow that much.
double slack(const std::vector<float>& x, const std::vector<float>& w) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += w[i] * x[i] * x[i];
  return 1e-5 * s;
}

double sym_error(const std::vector<float>& x, const std::vector<float>& w, float scale, const uint8_t* L, int nmax) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - double(scale) * (int(L[i]) - nmax);
    e += w[i] * d * d;
  }
  return e;
}

TEST_F(ScaleSearch, NearestIq4IndexIsTheNearestCodebookEntry) {
  std::uniform_real_distribution<float> u(-150.0f, 150.0f);
  for (int k = 0; k < 20000; ++k) {
    const float v = u(rng_);
    const int got = nearest_iq4_index(v);
    for (int c = 0; c < 16; ++c) ASSERT_LE(std::fabs(iq4_value(got) - v), std::fabs(iq4_value(c) - v)) << v;
  }
}

TEST_F(ScaleSearch, SymmetricBeatsAbsmaxAndIsLeastSquares) {
  for (int nmax : {4, 8, 32}) {
    for (int trial = 0; trial < 200; ++trial) {
      const std::vector<float> x = group(16);
      std::vector<float> w(x.size());
      for (size_t i = 0; i < x.size(); ++i) w[i] = x[i] * x[i];  // the default weights
      uint8_t L[16];
      const float s = search_symmetric(16, nmax, x.data(), nullptr, L);
      for (uint8_t l : L) ASSERT_LT(l, 2 * nmax);
      // absmax fit: the extreme value takes code -nmax
      float m = 0;
      for (float v : x) m = std::fabs(v) > std::fabs(m) ? v : m;
      uint8_t R[16];
      for (int i = 0; i < 16; ++i) R[i] = uint8_t(std::clamp<int>(std::nearbyint(-nmax * x[i] / m), -nmax, nmax - 1) + nmax);
      EXPECT_LE(sym_error(x, w, s, L, nmax), sym_error(x, w, -m / nmax, R, nmax) + slack(x, w));
      // least squares: neither a slightly larger nor smaller scale does better
      for (float f : {0.99f, 1.01f}) EXPECT_LE(sym_error(x, w, s, L, nmax), sym_error(x, w, s * f, L, nmax) + slack(x, w));
    }
  }
}

TEST_F(ScaleSearch, RefinedSymmetricNoWorseThanItsStart) {
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> x = group(16);
    std::vector<float> w(x.size());
    for (size_t i = 0; i < x.size(); ++i) w[i] = x[i] * x[i];
    uint8_t L[16], R[16];
    const float s = search_symmetric_refined(16, 4, x.data(), L);
    float m = 0;
    for (float v : x) m = std::fabs(v) > std::fabs(m) ? v : m;
    for (int i = 0; i < 16; ++i) R[i] = uint8_t(std::clamp<int>(std::nearbyint(-4 * x[i] / m), -4, 3) + 4);
    double lx = 0, l2 = 0;  // least-squares scale of the start codes
    for (int i = 0; i < 16; ++i) lx += w[i] * x[i] * (R[i] - 4), l2 += w[i] * (R[i] - 4) * (R[i] - 4);
    EXPECT_LE(sym_error(x, w, s, L, 4), sym_error(x, w, float(lx / l2), R, 4) + slack(x, w));
  }
}

TEST_F(ScaleSearch, AffineBeatsTheRangeFit) {
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> x = group(32);
    std::vector<float> w(x.size());
    for (size_t i = 0; i < x.size(); ++i) w[i] = 0.5f + std::fabs(x[i]);
    uint8_t L[32];
    float min = 0;
    const float s = search_affine(32, 15, x.data(), w.data(), L, &min, AffineSearch{-1.0f, 0.1f, 20, false});
    ASSERT_GE(min, 0.0f);
    float lo = 0, hi = x[0];
    for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
    const float rs = (hi - lo) / 15;
    double e = 0, r = 0;
    for (int i = 0; i < 32; ++i) {
      ASSERT_LE(L[i], 15);
      const double d = x[i] - (double(s) * L[i] - min);
      e += w[i] * d * d;
      const double q = std::clamp<double>(std::nearbyint((x[i] - lo) / rs), 0, 15);
      const double dr = x[i] - (rs * q + lo);
      r += w[i] * dr * dr;
    }
    EXPECT_LE(e, r + slack(x, w));
  }
}

TEST_F(ScaleSearch, PositiveScalesFitWithinTheirRange) {
  std::uniform_real_distribution<float> u(0.0f, 3.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x(8), w(8);
    for (auto& v : x) v = u(rng_);
    for (auto& v : w) v = 0.1f + u(rng_);
    uint8_t L[8];
    const float d = search_positive(8, 63, x.data(), w.data(), L);
    ASSERT_GT(d, 0.0f);
    double e = 0, r = 0;
    const float m = *std::max_element(x.begin(), x.end());
    for (int i = 0; i < 8; ++i) {
      ASSERT_LE(L[i], 63);
      e += w[i] * (x[i] - d * L[i]) * (x[i] - d * L[i]);
      const double q = std::nearbyint(63 * x[i] / m) * m / 63;
      r += w[i] * (x[i] - q) * (x[i] - q);
    }
    EXPECT_LE(e, r + slack(x, w));
  }
  std::vector<float> zeros(8, 0.0f), w(8, 1.0f);
  uint8_t L[8];
  EXPECT_EQ(search_positive(8, 63, zeros.data(), w.data(), L), 0.0f);
}

TEST_F(ScaleSearch, Iq4NoWorseThanTheAbsmaxScale) {
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> x = group(32);
    uint8_t L[32];
    const float d = search_iq4(32, x.data(), nullptr, 7, L);
    std::vector<float> w(x.size());
    for (size_t i = 0; i < x.size(); ++i) w[i] = x[i] * x[i];
    float m = 0;
    for (float v : x) m = std::fabs(v) > std::fabs(m) ? v : m;
    const float d0 = m / -127.0f;
    double e = 0, r = 0;
    for (int i = 0; i < 32; ++i) {
      e += w[i] * std::pow(x[i] - d * iq4_value(L[i]), 2);
      r += w[i] * std::pow(x[i] - d0 * iq4_value(nearest_iq4_index(x[i] / d0)), 2);
    }
    EXPECT_LE(e, r + slack(x, w));
  }
}

}  // namespace
}  // namespace layerstream::math

#include "kernels/math/scale_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/math/kquant_blocks.h"

namespace layerstream::math {
namespace {

// The value of largest magnitude, with its sign; *amax gets its magnitude.
float signed_max(int n, const float* x, float* amax) {
  float max = 0, a = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > a) {
      a = ax;
      max = x[i];
    }
  }
  *amax = a;
  return max;
}

// Code of v on lo..hi: v clamped, then rounded to nearest (ties to even).
// Written so that the loops below vectorise (GCC's irintf becomes cvtps2dq;
// this file is compiled with -O3 and reassociating float sums, see
// kernels/sources.cmake).
inline float code_of(float v, float lo, float hi) {
  const float c = std::min(std::max(v, lo), hi);
#if defined(__GNUC__) && !defined(__clang__)
  return static_cast<float>(__builtin_irintf(c));
#else
  return __builtin_rintf(c);
#endif
}

int clamp_code(float v, int lo, int hi) { return code_in(v, lo, hi); }

// Sums of a symmetric code assignment at inverse scale `iscale`: sum w x l and
// sum w l^2 (l in -nmax..nmax-1); the codes go to L (offset by nmax) when given.
void symmetric_sums(int n, int nmax, const float* x, const float* w, float iscale, float* sumlx, float* suml2,
                    uint8_t* L) {
  const float lo = -static_cast<float>(nmax), hi = static_cast<float>(nmax - 1);
  float slx = 0, sl2 = 0;
  for (int i = 0; i < n; ++i) {
    const float l = code_of(iscale * x[i], lo, hi);
    const float wi = w ? w[i] : x[i] * x[i];
    slx += wi * x[i] * l;
    sl2 += wi * l * l;
  }
  if (L) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(clamp_code(iscale * x[i], -nmax, nmax - 1) + nmax);
  }
  *sumlx = slx;
  *suml2 = sl2;
}

// Weighted error of scale * L - min against x (squared, or absolute with mad).
float affine_error(int n, const float* x, const float* w, const float* L, float scale, float min, bool mad) {
  float err = 0;
  if (mad) {
    for (int i = 0; i < n; ++i) err += w[i] * std::fabs(scale * L[i] + min - x[i]);
  } else {
    for (int i = 0; i < n; ++i) {
      const float diff = scale * L[i] + min - x[i];
      err += w[i] * diff * diff;
    }
  }
  return err;
}

}  // namespace

float search_symmetric(int n, int nmax, const float* x, const float* w, uint8_t* L) {
  float amax;
  const float max = signed_max(n, x, &amax);
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0;
  }
  float sumlx, suml2;
  symmetric_sums(n, nmax, x, w, -static_cast<float>(nmax) / max, &sumlx, &suml2, L);
  float scale = suml2 > 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    symmetric_sums(n, nmax, x, w, iscale, &sumlx, &suml2, nullptr);
    // The least-squares scale sumlx / suml2 leaves an error of
    // sum w x^2 - sumlx^2 / suml2: larger sumlx^2 / suml2 is better.
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      symmetric_sums(n, nmax, x, w, iscale, &sumlx, &suml2, L);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float search_symmetric_refined(int n, int nmax, const float* x, uint8_t* L) {
  float amax;
  const float max = signed_max(n, x, &amax);
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  int l[256];
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    l[i] = clamp_code(iscale * x[i], -nmax, nmax - 1);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l[i]);
    suml2 += w * static_cast<float>(l[i] * l[i]);
  }
  for (int round = 0; round < 5; ++round) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(l[i]);
      if (slx <= 0) continue;
      float sl2 = suml2 - w * static_cast<float>(l[i] * l[i]);
      const int nl = clamp_code(x[i] * sl2 / slx, -nmax, nmax - 1);
      if (nl == l[i]) continue;
      slx += w * x[i] * static_cast<float>(nl);
      sl2 += w * static_cast<float>(nl * nl);
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        l[i] = nl;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(l[i] + nmax);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

float search_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min,
                    const AffineSearch& p) {
  float min = x[0], max = x[0], sum_w = 0, sum_x = 0;
  for (int i = 0; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  min = std::min(min, 0.0f);
  if (max <= min) {
    std::memset(L, 0, static_cast<size_t>(n));
    *the_min = -min;
    return 0;
  }
  const float fmax = static_cast<float>(nmax);
  float iscale = fmax / (max - min);
  float scale = 1 / iscale;
  float best_l[256], aux[256];
  for (int i = 0; i < n; ++i) best_l[i] = code_of(iscale * (x[i] - min), 0.0f, fmax);
  float best = affine_error(n, x, w, best_l, scale, min, p.use_mad);
  for (int k = 0; k <= p.nstep; ++k) {
    iscale = (p.rmin + p.rdelta * static_cast<float>(k) + fmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const float l = code_of(iscale * (x[i] - min), 0.0f, fmax);
      aux[i] = l;
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    // Weighted least squares of x ~ s l + m over (s, m); m is capped at 0.
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / det;
    float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m > 0) {
      m = 0;
      s = sum_xl / sum_l2;
    }
    const float err = affine_error(n, x, w, aux, s, m, p.use_mad);
    if (err < best) {
      std::memcpy(best_l, aux, sizeof(float) * static_cast<size_t>(n));
      best = err;
      scale = s;
      min = m;
    }
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(best_l[i]);
  *the_min = -min;
  return scale;
}

float search_positive(int n, int nmax, const float* x, const float* w, uint8_t* L) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max <= 0) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0;
  }
  auto code = [&](float iscale, int i) { return code_in(iscale * x[i], 0, nmax); };
  auto mse = [&](float iscale) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = x[i] - static_cast<float>(code(iscale, i)) / iscale;
      e += w[i] * diff * diff;
    }
    return e;
  };
  float iscale = static_cast<float>(nmax) / max;
  float best = mse(iscale);
  for (int k = -4; k <= 4; ++k) {
    if (k == 0) continue;
    const float is = (0.1f * static_cast<float>(k) + static_cast<float>(nmax)) / max;
    const float e = mse(is);
    if (e < best) {
      best = e;
      iscale = is;
    }
  }
  int l[256];
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    l[i] = code(iscale, i);
    sumlx += w[i] * x[i] * static_cast<float>(l[i]);
    suml2 += w[i] * static_cast<float>(l[i] * l[i]);
  }
  for (int round = 0; round < 5; ++round) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      float slx = sumlx - w[i] * x[i] * static_cast<float>(l[i]);
      float sl2 = suml2 - w[i] * static_cast<float>(l[i] * l[i]);
      if (slx <= 0 || sl2 <= 0) continue;
      const int nl = code_in(x[i] * sl2 / slx, 0, nmax);
      if (nl == l[i]) continue;
      slx += w[i] * x[i] * static_cast<float>(nl);
      sl2 += w[i] * static_cast<float>(nl * nl);
      if (slx * slx * suml2 > sumlx * sumlx * sl2) {
        l[i] = nl;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(l[i]);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

int nearest_iq4_index(float v) {
  // The codebook is sorted: binary search for the bracketing pair.
  if (v <= iq4_value(0)) return 0;
  if (v >= iq4_value(15)) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < iq4_value(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - static_cast<float>(iq4_value(lo)) < static_cast<float>(iq4_value(hi)) - v ? lo : hi;
}

float search_iq4(int n, const float* x, const float* w, int ntry, uint8_t* L) {
  float amax;
  const float max = signed_max(n, x, &amax);
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0;
  }
  auto fit = [&](float id, float* sumqx, float* sumq2, uint8_t* out) {
    float sx = 0, s2 = 0;
    for (int i = 0; i < n; ++i) {
      const int idx = nearest_iq4_index(id * x[i]);
      if (out) out[i] = static_cast<uint8_t>(idx);
      const float q = iq4_value(idx);
      const float wi = w ? w[i] : x[i] * x[i];
      sx += wi * q * x[i];
      s2 += wi * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
  };
  float sumqx, sumq2;
  fit(-static_cast<float>(iq4_value(0)) / max, &sumqx, &sumq2, L);
  float d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int k = -ntry; k <= ntry; ++k) {
    const float id = (static_cast<float>(k) + static_cast<float>(iq4_value(0))) / max;
    fit(id, &sumqx, &sumq2, nullptr);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  // The codes of the final scale (each value to its nearest code under d).
  const float id = d != 0 ? 1 / d : 0.0f;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_iq4_index(id * x[i]));
  return d;
}

}  // namespace layerstream::math

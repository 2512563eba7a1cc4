#include "kernels/math/kquant_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace layerstream::math {
namespace {

float half_round(float v, uint16_t* bits) {
  *bits = f32_to_f16(v);
  return f16_to_f32(*bits);
}

// f16 of v rounded away from zero, so that the largest sub-scale still fits
// its code range (matters where f16 is coarse: subnormal super-scales).
float half_round_out(float v, uint16_t* bits) {
  *bits = f32_to_f16(v);
  if (std::fabs(f16_to_f32(*bits)) < std::fabs(v) && (*bits & 0x7FFF) < 0x7BFF) ++*bits;
  return f16_to_f32(*bits);
}

int clampi(long v, int lo, int hi) { return static_cast<int>(std::clamp<long>(v, lo, hi)); }

// The value of largest magnitude, with its sign.
float signed_absmax(const float* x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  }
  return m;
}

// ---- affine groups: x = d*sc * q - dmin*m, q in 0..nmax, sc and m in 0..smax --
struct AffineFit {
  uint16_t d = 0, dmin = 0;
  int sc[16] = {}, m[16] = {};
  uint8_t q[kQK_K] = {};
};

AffineFit fit_affine(const float* x, int n_groups, int group, int nmax, int smax) {
  AffineFit f;
  float scale[16], min[16], max_scale = 0, max_min = 0;
  for (int g = 0; g < n_groups; ++g) {
    const float* xg = x + g * group;
    float lo = 0, hi = xg[0];
    for (int i = 0; i < group; ++i) {
      lo = std::fmin(lo, xg[i]);
      hi = std::fmax(hi, xg[i]);
    }
    scale[g] = std::fmax(hi - lo, 0.0f) / nmax;
    min[g] = -lo;
    max_scale = std::fmax(max_scale, scale[g]);
    max_min = std::fmax(max_min, min[g]);
  }
  const float d = half_round_out(max_scale / smax, &f.d);
  const float dmin = half_round_out(max_min / smax, &f.dmin);
  for (int g = 0; g < n_groups; ++g) {
    const float* xg = x + g * group;
    const long r = d > 0 ? std::clamp<long>(std::lround(scale[g] / d), 0, smax) : 0;
    const long rm = dmin > 0 ? std::clamp<long>(std::lround(min[g] / dmin), 0, smax) : 0;
    double best = INFINITY;
    for (long s = std::max(0L, r - 1); s <= std::min<long>(smax, r + 1); ++s) {
      for (long mm = std::max(0L, rm - 1); mm <= std::min<long>(smax, rm + 1); ++mm) {
        const float ds = d * static_cast<float>(s), ms = dmin * static_cast<float>(mm);
        double err = 0;
        uint8_t q[32];
        for (int i = 0; i < group; ++i) {
          q[i] = static_cast<uint8_t>(ds > 0 ? clampi(std::lround((xg[i] + ms) / ds), 0, nmax) : 0);
          const double e = static_cast<double>(ds) * q[i] - ms - xg[i];
          err += e * e;
        }
        if (err < best) {
          best = err;
          f.sc[g] = static_cast<int>(s);
          f.m[g] = static_cast<int>(mm);
          std::memcpy(f.q + g * group, q, group);
        }
      }
    }
  }
  return f;
}

// ---- symmetric groups: x = d*l * code, l in lmin..lmax -----------------------
// Codes are integers in qmin..qmax, or (codebook) the IQ4 values.
struct SymFit {
  uint16_t d = 0;
  int l[16] = {};
  int8_t q[kQK_K] = {};  // codes (codebook: the index)
};

int nearest_iq4(float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i) {
    if (std::fabs(iq4_value(i) - v) < std::fabs(iq4_value(best) - v)) best = i;
  }
  return best;
}

SymFit fit_symmetric(const float* x, int n_groups, int group, int qmin, int qmax, bool codebook, int lmin, int lmax) {
  SymFit f;
  const float qneg = codebook ? -127.0f : static_cast<float>(qmin);
  float scale[16], max_scale = 0;
  for (int g = 0; g < n_groups; ++g) {
    scale[g] = signed_absmax(x + g * group, group) / qneg;
    if (std::fabs(scale[g]) > std::fabs(max_scale)) max_scale = scale[g];
  }
  const float d = half_round_out(max_scale / static_cast<float>(lmin), &f.d);
  for (int g = 0; g < n_groups; ++g) {
    const float* xg = x + g * group;
    const long r = d != 0 ? std::clamp<long>(std::lround(scale[g] / d), lmin, lmax) : 0;
    double best = INFINITY;
    for (long l = std::max<long>(lmin, r - 1); l <= std::min<long>(lmax, r + 1); ++l) {
      const float ds = d * static_cast<float>(l);
      double err = 0;
      int8_t q[32];
      for (int i = 0; i < group; ++i) {
        double v;
        if (codebook) {
          q[i] = static_cast<int8_t>(ds != 0 ? nearest_iq4(xg[i] / ds) : 8);
          v = static_cast<double>(ds) * iq4_value(q[i]);
        } else {
          q[i] = static_cast<int8_t>(ds != 0 ? clampi(std::lround(xg[i] / ds), qmin, qmax) : 0);
          v = static_cast<double>(ds) * q[i];
        }
        err += (v - xg[i]) * (v - xg[i]);
      }
      if (err < best) {
        best = err;
        f.l[g] = static_cast<int>(l);
        std::memcpy(f.q + g * group, q, group);
      }
    }
  }
  return f;
}

// Q5_0 / Q5_1 packing: 5-bit codes c[32] (0..31).
template <typename Block>
void pack_q5(const int* c, Block* b) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    b->qs[j] = static_cast<uint8_t>((c[j] & 0xF) | ((c[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>(c[j] >> 4) << j;
    qh |= static_cast<uint32_t>(c[j + 16] >> 4) << (j + 16);
  }
  for (int k = 0; k < 4; ++k) b->qh[k] = static_cast<uint8_t>(qh >> (8 * k));
}

// Q4_K / Q5_K scales: 6-bit sc and m of 8 sub-blocks into 12 bytes.
void pack_k4_scales(const int* sc, const int* m, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] |= static_cast<uint8_t>(sc[j] & 63);
      s[j + 4] |= static_cast<uint8_t>(m[j] & 63);
    } else {
      s[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
      s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
}

}  // namespace

BlockQ5_0 quantize_block_q5_0(const float* x) {
  BlockQ5_0 b{};
  const float d = half_round(signed_absmax(x, 32) / -16.0f, &b.d);
  int c[32];
  for (int j = 0; j < 32; ++j) c[j] = (d != 0 ? clampi(std::lround(x[j] / d), -16, 15) : 0) + 16;
  pack_q5(c, &b);
  return b;
}

BlockQ5_1 quantize_block_q5_1(const float* x) {
  BlockQ5_1 b{};
  float lo = x[0], hi = x[0];
  for (int j = 1; j < 32; ++j) {
    lo = std::fmin(lo, x[j]);
    hi = std::fmax(hi, x[j]);
  }
  const float d = half_round((hi - lo) / 31.0f, &b.d);
  const float m = half_round(lo, &b.m);
  int c[32];
  for (int j = 0; j < 32; ++j) c[j] = d > 0 ? clampi(std::lround((x[j] - m) / d), 0, 31) : 0;
  pack_q5(c, &b);
  return b;
}

BlockQ2_K quantize_block_q2_k(const float* x) {
  const AffineFit f = fit_affine(x, 16, 16, 3, 15);
  BlockQ2_K b{};
  b.d = f.d;
  b.dmin = f.dmin;
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(f.sc[g] | (f.m[g] << 4));
  // Element l of sub-block s = 4n + k sits in qs[32n + l] at bits 2k.
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) b.qs[32 * (s / 4) + l] |= static_cast<uint8_t>(f.q[32 * s + l] << (2 * (s % 4)));
  }
  return b;
}

BlockQ3_K quantize_block_q3_k(const float* x) {
  const SymFit f = fit_symmetric(x, 16, 16, -4, 3, false, -32, 31);
  BlockQ3_K b{};
  b.d = f.d;
  for (int i = 0; i < 16; ++i) {
    const int v = f.l[i] + 32;
    if (i < 8) {
      b.scales[i] |= static_cast<uint8_t>(v & 0xF);
    } else {
      b.scales[i - 8] |= static_cast<uint8_t>((v & 0xF) << 4);
    }
    b.scales[8 + i % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (i / 4)));
  }
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const int c = f.q[32 * s + l] + 4;  // 0..7
      b.qs[32 * (s / 4) + l] |= static_cast<uint8_t>((c & 3) << (2 * (s % 4)));
      b.hmask[l] |= static_cast<uint8_t>((c >> 2) << s);
    }
  }
  return b;
}

BlockQ4_K quantize_block_q4_k(const float* x) {
  const AffineFit f = fit_affine(x, 8, 32, 15, 63);
  BlockQ4_K b{};
  b.d = f.d;
  b.dmin = f.dmin;
  pack_k4_scales(f.sc, f.m, b.scales);
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) b.qs[32 * (s / 2) + l] |= static_cast<uint8_t>(f.q[32 * s + l] << (4 * (s % 2)));
  }
  return b;
}

BlockQ5_K quantize_block_q5_k(const float* x) {
  const AffineFit f = fit_affine(x, 8, 32, 31, 63);
  BlockQ5_K b{};
  b.d = f.d;
  b.dmin = f.dmin;
  pack_k4_scales(f.sc, f.m, b.scales);
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const int c = f.q[32 * s + l];
      b.qs[32 * (s / 2) + l] |= static_cast<uint8_t>((c & 0xF) << (4 * (s % 2)));
      b.qh[l] |= static_cast<uint8_t>((c >> 4) << s);
    }
  }
  return b;
}

BlockQ6_K quantize_block_q6_k(const float* x) {
  const SymFit f = fit_symmetric(x, 16, 16, -32, 31, false, -128, 127);
  BlockQ6_K b{};
  b.d = f.d;
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(f.l[g]);
  for (int s = 0; s < 8; ++s) {
    const int n = s / 4, k = s % 4;
    for (int l = 0; l < 32; ++l) {
      const int c = f.q[32 * s + l] + 32;  // 0..63
      b.ql[64 * n + 32 * (k % 2) + l] |= static_cast<uint8_t>((c & 0xF) << (4 * (k / 2)));
      b.qh[32 * n + l] |= static_cast<uint8_t>((c >> 4) << (2 * k));
    }
  }
  return b;
}

BlockIQ4_NL quantize_block_iq4_nl(const float* x) {
  BlockIQ4_NL best{};
  double best_err = INFINITY;
  const float base = signed_absmax(x, 32) / -127.0f;
  // A few scales around the one that maps the extreme to the codebook's end.
  for (float f : {0.85f, 0.9f, 0.95f, 1.0f, 1.05f}) {
    BlockIQ4_NL b{};
    const float d = half_round(base * f, &b.d);
    double err = 0;
    int idx[32];
    for (int j = 0; j < 32; ++j) {
      idx[j] = d != 0 ? nearest_iq4(x[j] / d) : 8;
      const double e = static_cast<double>(d) * iq4_value(idx[j]) - x[j];
      err += e * e;
    }
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(idx[j] | (idx[j + 16] << 4));
    if (err < best_err) {
      best_err = err;
      best = b;
    }
  }
  return best;
}

BlockIQ4_XS quantize_block_iq4_xs(const float* x) {
  const SymFit f = fit_symmetric(x, 8, 32, 0, 0, true, -32, 31);
  BlockIQ4_XS b{};
  b.d = f.d;
  for (int s = 0; s < 8; ++s) {
    const int ls = f.l[s] + 32;
    b.scales_l[s / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (s % 2)));
    b.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * s));
    for (int j = 0; j < 16; ++j) {
      b.qs[16 * s + j] = static_cast<uint8_t>(f.q[32 * s + j] | (f.q[32 * s + j + 16] << 4));
    }
  }
  return b;
}

}  // namespace layerstream::math

#include "kernels/math/kquant_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/math/scale_search.h"

namespace layerstream::math {
namespace {

int clampi(long v, int lo, int hi) { return static_cast<int>(std::clamp<long>(v, lo, hi)); }

// The value of largest magnitude, with its sign.
float signed_absmax(const float* x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  }
  return m;
}

float sum_squares(const float* x, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

// Element weights of the importance-weighted searches: qw[i] * sqrt(sigma2 + x[i]^2).
void importance_weights(const float* x, const float* qw, int n, float sigma2, float* w) {
  for (int i = 0; i < n; ++i) w[i] = qw[i] * std::sqrt(sigma2 + x[i] * x[i]);
}

float sum_of(const float* w, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += w[i];
  return s;
}

// ---- affine super-blocks (Q2_K, Q4_K, Q5_K): x = d sc L - dmin m ------------
// Codes L in 0..nmax per element; sc and m are `sbits`-bit sub-scales.
struct AffineBlock {
  uint16_t d = 0, dmin = 0;
  uint8_t sc[16] = {}, m[16] = {};
  uint8_t L[kQK_K] = {};
};

// Quantises the groups' scales and mins to 0..smax by the largest of each
// (llama.cpp's reference path).
void quantise_sub_scales_by_max(const float* scales, const float* mins, int n_groups, int smax, AffineBlock* b) {
  float max_scale = 0, max_min = 0;
  for (int g = 0; g < n_groups; ++g) {
    max_scale = std::max(max_scale, scales[g]);
    max_min = std::max(max_min, mins[g]);
  }
  const float is = max_scale > 0 ? static_cast<float>(smax) / max_scale : 0.0f;
  const float im = max_min > 0 ? static_cast<float>(smax) / max_min : 0.0f;
  for (int g = 0; g < n_groups; ++g) {
    b->sc[g] = static_cast<uint8_t>(code_in(is * scales[g], 0, smax));
    b->m[g] = static_cast<uint8_t>(code_in(im * mins[g], 0, smax));
  }
  b->d = f32_to_f16(max_scale / static_cast<float>(smax));
  b->dmin = f32_to_f16(max_min / static_cast<float>(smax));
}

// Codes of every group again, against the stored scales.
void requantise_affine(const float* x, int n_groups, int group, int nmax, AffineBlock* b) {
  const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
  for (int g = 0; g < n_groups; ++g) {
    const float dg = d * static_cast<float>(b->sc[g]);
    if (dg == 0) continue;
    const float mg = dmin * static_cast<float>(b->m[g]);
    for (int i = 0; i < group; ++i) {
      b->L[g * group + i] = static_cast<uint8_t>(code_in((x[g * group + i] + mg) / dg, 0, nmax));
    }
  }
}

struct AffineParams {
  int n_groups, group, nmax, smax;
  AffineSearch ref;       // the search without importance weights
  bool ref_abs_weights;   // reference weights |x| (Q2_K), else av_x + |x|
};

AffineBlock fit_affine(const float* x, const float* qw, const AffineParams& p) {
  AffineBlock b;
  float scales[16], mins[16], w[kQK_K], sw[16];
  const int n = p.n_groups * p.group;
  if (!qw) {
    for (int g = 0; g < p.n_groups; ++g) {
      const float* xg = x + g * p.group;
      float* wg = w + g * p.group;
      // |x| (Q2_K), or |x| plus the group's RMS (Q4_K, Q5_K).
      const float av = p.ref_abs_weights ? 0.0f : std::sqrt(sum_squares(xg, p.group) / static_cast<float>(p.group));
      for (int i = 0; i < p.group; ++i) wg[i] = av + std::fabs(xg[i]);
      scales[g] = search_affine(p.group, p.nmax, xg, wg, b.L + g * p.group, &mins[g], p.ref);
    }
    quantise_sub_scales_by_max(scales, mins, p.n_groups, p.smax, &b);
  } else {
    // Q2_K uses sigma^2 = mean x^2, Q4_K / Q5_K twice that.
    const float sigma2 = sum_squares(x, n) / static_cast<float>(n) * (p.ref_abs_weights ? 1.0f : 2.0f);
    importance_weights(x, qw, n, sigma2, w);
    const AffineSearch search{-0.9f, 0.05f, 36, false};
    for (int g = 0; g < p.n_groups; ++g) {
      sw[g] = sum_of(w + g * p.group, p.group);
      scales[g] = search_affine(p.group, p.nmax, x + g * p.group, w + g * p.group, b.L + g * p.group, &mins[g], search);
    }
    b.d = f32_to_f16(search_positive(p.n_groups, p.smax, scales, sw, b.sc));
    b.dmin = f32_to_f16(search_positive(p.n_groups, p.smax, mins, sw, b.m));
  }
  requantise_affine(x, p.n_groups, p.group, p.nmax, &b);
  return b;
}

const AffineParams kQ2K{16, 16, 3, 15, {-0.5f, 0.1f, 15, true}, true};
const AffineParams kQ4K{8, 32, 15, 63, {-1.0f, 0.1f, 20, false}, false};
const AffineParams kQ5K{8, 32, 31, 63, {-0.5f, 0.1f, 15, false}, false};

// ---- symmetric super-blocks (Q3_K, Q6_K): x = d l (L - half) ---------------
struct SymBlock {
  uint16_t d = 0;
  int l[16] = {};          // signed sub-scales
  uint8_t L[kQK_K] = {};   // codes, offset by `half`
};

// Signed sub-scales to lmin..lmax by the one of largest magnitude, which
// takes lmin (llama.cpp's reference path).
void quantise_signed_scales_by_max(const float* scales, int lmin, int lmax, SymBlock* b) {
  float max_scale = 0;
  for (int g = 0; g < 16; ++g) {
    if (std::fabs(scales[g]) > std::fabs(max_scale)) max_scale = scales[g];
  }
  if (std::fabs(max_scale) < kGroupMaxEps) return;  // an all-zero block
  const float iscale = static_cast<float>(lmin) / max_scale;
  for (int g = 0; g < 16; ++g) b->l[g] = code_in(iscale * scales[g], lmin, lmax);
  b->d = f32_to_f16(1 / iscale);
}

void requantise_symmetric(const float* x, int qmin, int qmax, SymBlock* b) {
  const float d = f16_to_f32(b->d);
  for (int g = 0; g < 16; ++g) {
    const float dg = d * static_cast<float>(b->l[g]);
    if (dg == 0) continue;
    for (int i = 0; i < 16; ++i) {
      b->L[16 * g + i] = static_cast<uint8_t>(code_in(x[16 * g + i] / dg, qmin, qmax) - qmin);
    }
  }
}

SymBlock fit_q3(const float* x, const float* qw) {
  SymBlock b;
  float scales[16];
  if (!qw) {
    for (int g = 0; g < 16; ++g) scales[g] = search_symmetric_refined(16, 4, x + 16 * g, b.L + 16 * g);
    quantise_signed_scales_by_max(scales, -32, 31, &b);
  } else {
    float w[kQK_K], sw[16];
    importance_weights(x, qw, kQK_K, 2 * sum_squares(x, kQK_K) / kQK_K, w);
    for (int g = 0; g < 16; ++g) {
      sw[g] = sum_of(w + 16 * g, 16);
      scales[g] = search_symmetric(16, 4, x + 16 * g, w + 16 * g, b.L + 16 * g);
    }
    uint8_t ls[16];
    b.d = f32_to_f16(search_symmetric(16, 32, scales, sw, ls));
    for (int g = 0; g < 16; ++g) b.l[g] = ls[g] - 32;
  }
  requantise_symmetric(x, -4, 3, &b);
  return b;
}

SymBlock fit_q6(const float* x, const float* qw) {
  SymBlock b;
  float scales[16];
  for (int g = 0; g < 16; ++g) scales[g] = search_symmetric(16, 32, x + 16 * g, qw ? qw + 16 * g : nullptr, b.L + 16 * g);
  quantise_signed_scales_by_max(scales, -128, 127, &b);
  requantise_symmetric(x, -32, 31, &b);
  return b;
}

// Q5_0 / Q5_1 packing: 5-bit codes c[32] (0..31).
template <typename Block, typename Code>
void pack_q5(const Code* c, Block* b) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    b->qs[j] = static_cast<uint8_t>((c[j] & 0xF) | ((c[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>(c[j] >> 4) << j;
    qh |= static_cast<uint32_t>(c[j + 16] >> 4) << (j + 16);
  }
  for (int k = 0; k < 4; ++k) b->qh[k] = static_cast<uint8_t>(qh >> (8 * k));
}

// Q4_0 / Q4_1 / IQ4_NL packing: 4-bit codes L[32], element j in the low
// nibble of qs[j], element j + 16 in the high one.
void pack_q4(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

// Q4_0, Q4_1, Q5_0 and Q5_1 with importance weights: codes 0..nmax from the
// weighted search, symmetric (d) or, for the types with an offset m, affine.
template <typename Block>
Block quantize_weighted(const float* x, const float* qw, float sigma2) {
  constexpr bool kAffine = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;
  constexpr bool kFiveBit = std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>;
  constexpr int kNmax = kFiveBit ? (kAffine ? 31 : 16) : (kAffine ? 15 : 8);
  float w[32], min = 0;
  uint8_t L[32];
  importance_weights(x, qw, 32, sigma2, w);
  Block b{};
  if constexpr (kAffine) {
    b.d = f32_to_f16(search_affine(32, kNmax, x, w, L, &min, AffineSearch{-0.9f, 0.05f, 36, false}));
    b.m = f32_to_f16(-min);
  } else {
    b.d = f32_to_f16(search_symmetric(32, kNmax, x, w, L));
  }
  if constexpr (kFiveBit) {
    pack_q5(L, &b);
  } else {
    pack_q4(L, b.qs);
  }
  return b;
}

// Q4_K / Q5_K scales: 6-bit sc and m of 8 sub-blocks into 12 bytes.
void pack_k4_scales(const uint8_t* sc, const uint8_t* m, uint8_t* s) {
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

// Q4_K and Q5_K: affine sub-blocks of 32 with 6-bit scales and mins. Code
// element l of sub-block s: its low nibble in qs[32 (s / 2) + l] (low half
// for s even, high for odd); Q5_K's fifth bit is bit s of qh[l].
template <typename Block>
Block quantize_k4_like(const float* x, const float* qw, const AffineParams& params) {
  const AffineBlock f = fit_affine(x, qw, params);
  Block b{};
  b.d = f.d;
  b.dmin = f.dmin;
  pack_k4_scales(f.sc, f.m, b.scales);
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const int c = f.L[32 * s + l];
      b.qs[32 * (s / 2) + l] |= static_cast<uint8_t>((c & 0xF) << (4 * (s % 2)));
      if constexpr (std::is_same_v<Block, BlockQ5_K>) b.qh[l] |= static_cast<uint8_t>((c >> 4) << s);
    }
  }
  return b;
}

// IQ4 search of a super-block of `n` elements in groups of 32 (llama.cpp's
// quantize_row_iq4_nl_impl): per-group scales, then (n > 32) 6-bit sub-scales.
struct Iq4Fit {
  uint16_t d = 0;
  int ls[8] = {};  // sub-scales + 32 (IQ4_XS)
  uint8_t L[kQK_K] = {};
};

Iq4Fit fit_iq4(const float* x, const float* qw, int n) {
  Iq4Fit f;
  float w[kQK_K], scales[8];
  const float sigma2 = 2 * sum_squares(x, n) / static_cast<float>(n);
  if (qw) importance_weights(x, qw, n, sigma2, w);
  const int groups = n / 32;
  float max_scale = 0;
  for (int g = 0; g < groups; ++g) {
    scales[g] = search_iq4(32, x + 32 * g, qw ? w + 32 * g : nullptr, 7, f.L + 32 * g);
    if (std::fabs(scales[g]) > std::fabs(max_scale)) max_scale = scales[g];
  }
  if (groups == 1) {
    f.d = f32_to_f16(scales[0]);
    return f;
  }
  const float d = -max_scale / 32;
  f.d = f32_to_f16(d);
  const float id = d != 0 ? 1 / d : 0.0f;
  for (int g = 0; g < groups; ++g) {
    const int l = code_in(id * scales[g], -32, 31);
    f.ls[g] = l + 32;
    const float dl = d * static_cast<float>(l);
    const float idl = dl != 0 ? 1 / dl : 0.0f;
    for (int j = 0; j < 32; ++j) f.L[32 * g + j] = static_cast<uint8_t>(nearest_iq4_index(idl * x[32 * g + j]));
  }
  return f;
}

}  // namespace

BlockQ5_0 quantize_block_q5_0(const float* x) {
  BlockQ5_0 b{};
  b.d = f32_to_f16(signed_absmax(x, 32) / -16.0f);
  const float d = f16_to_f32(b.d);
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
  b.d = f32_to_f16((hi - lo) / 31.0f);
  b.m = f32_to_f16(lo);
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  int c[32];
  for (int j = 0; j < 32; ++j) c[j] = d > 0 ? clampi(std::lround((x[j] - m) / d), 0, 31) : 0;
  pack_q5(c, &b);
  return b;
}

BlockQ4_0 quantize_block_q4_0_weighted(const float* x, const float* qw, float sigma2) {
  return quantize_weighted<BlockQ4_0>(x, qw, sigma2);
}
BlockQ4_1 quantize_block_q4_1_weighted(const float* x, const float* qw, float sigma2) {
  return quantize_weighted<BlockQ4_1>(x, qw, sigma2);
}
BlockQ5_0 quantize_block_q5_0_weighted(const float* x, const float* qw, float sigma2) {
  return quantize_weighted<BlockQ5_0>(x, qw, sigma2);
}
BlockQ5_1 quantize_block_q5_1_weighted(const float* x, const float* qw, float sigma2) {
  return quantize_weighted<BlockQ5_1>(x, qw, sigma2);
}

BlockQ2_K quantize_block_q2_k(const float* x, const float* qw) {
  const AffineBlock f = fit_affine(x, qw, kQ2K);
  BlockQ2_K b{};
  b.d = f.d;
  b.dmin = f.dmin;
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(f.sc[g] | (f.m[g] << 4));
  // Element l of sub-block s = 4n + k sits in qs[32n + l] at bits 2k.
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) b.qs[32 * (s / 4) + l] |= static_cast<uint8_t>(f.L[32 * s + l] << (2 * (s % 4)));
  }
  return b;
}

BlockQ3_K quantize_block_q3_k(const float* x, const float* qw) {
  const SymBlock f = fit_q3(x, qw);
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
      const int c = f.L[32 * s + l];  // 0..7
      b.qs[32 * (s / 4) + l] |= static_cast<uint8_t>((c & 3) << (2 * (s % 4)));
      b.hmask[l] |= static_cast<uint8_t>((c >> 2) << s);
    }
  }
  return b;
}

BlockQ4_K quantize_block_q4_k(const float* x, const float* qw) { return quantize_k4_like<BlockQ4_K>(x, qw, kQ4K); }

BlockQ5_K quantize_block_q5_k(const float* x, const float* qw) { return quantize_k4_like<BlockQ5_K>(x, qw, kQ5K); }

BlockQ6_K quantize_block_q6_k(const float* x, const float* qw) {
  const SymBlock f = fit_q6(x, qw);
  BlockQ6_K b{};
  b.d = f.d;
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(f.l[g]);
  for (int s = 0; s < 8; ++s) {
    const int n = s / 4, k = s % 4;
    for (int l = 0; l < 32; ++l) {
      const int c = f.L[32 * s + l];  // 0..63
      b.ql[64 * n + 32 * (k % 2) + l] |= static_cast<uint8_t>((c & 0xF) << (4 * (k / 2)));
      b.qh[32 * n + l] |= static_cast<uint8_t>((c >> 4) << (2 * k));
    }
  }
  return b;
}

BlockIQ4_NL quantize_block_iq4_nl(const float* x, const float* qw) {
  const Iq4Fit f = fit_iq4(x, qw, 32);
  BlockIQ4_NL b{};
  b.d = f.d;
  pack_q4(f.L, b.qs);
  return b;
}

BlockMXFP4 quantize_block_mxfp4(const float* x, const float* /*qw*/) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  BlockMXFP4 b{};
  if (amax > 0 && std::isfinite(amax)) {
    const int e = static_cast<int>(std::floor(std::log2(amax))) - 2 + 127;
    b.e = static_cast<uint8_t>(std::clamp(e, 0, 254));
  }
  const float d = e8m0_half_to_f32(b.e);
  uint8_t L[32];
  for (int j = 0; j < 32; ++j) {
    int best = 0;
    float best_err = std::fabs(x[j]);  // code 0 is 0
    for (int i = 1; i < 16; ++i) {
      const float err = std::fabs(static_cast<float>(mxfp4_value(i)) * d - x[j]);
      if (err < best_err) best = i, best_err = err;
    }
    L[j] = static_cast<uint8_t>(best);
  }
  pack_q4(L, b.qs);
  return b;
}

BlockIQ4_XS quantize_block_iq4_xs(const float* x, const float* qw) {
  const Iq4Fit f = fit_iq4(x, qw, kQK_K);
  BlockIQ4_XS b{};
  b.d = f.d;
  for (int s = 0; s < 8; ++s) {
    b.scales_l[s / 2] |= static_cast<uint8_t>((f.ls[s] & 0xF) << (4 * (s % 2)));
    b.scales_h |= static_cast<uint16_t>((f.ls[s] >> 4) << (2 * s));
    for (int j = 0; j < 16; ++j) {
      b.qs[16 * s + j] = static_cast<uint8_t>(f.L[32 * s + j] | (f.L[32 * s + j + 16] << 4));
    }
  }
  return b;
}

}  // namespace layerstream::math

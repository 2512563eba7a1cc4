// Rotary position embedding of one pair, shared by the CPU and CUDA kernels.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/math/host_device.h"

namespace layerstream::math {

// Rotation angle of pair i (0 <= i < n_rot/2) at position pos:
//   pos * freq_scale * freq_base^(-2i / n_rot) / freq_factor
// (freq_factor: Llama 3.1's per-pair `rope_freqs`, 1 when the model has none).
LS_HD float rope_theta(int32_t pos, int64_t i, int64_t n_rot, float freq_base, float freq_scale,
                       float freq_factor = 1.0f) {
  const float inv_freq = powf(freq_base, -2.0f * static_cast<float>(i) / static_cast<float>(n_rot));
  return static_cast<float>(pos) * freq_scale * inv_freq / freq_factor;
}

// YaRN (arXiv 2309.00071, as ggml computes it): pairs that turn fewer than
// beta_slow times over the original context are interpolated (theta *
// freq_scale), pairs that turn more than beta_fast times keep their angle
// (extrapolated), and a linear ramp over pair indices [low, high] blends the
// two. The ramp's ends are these "correction dims", pair indices where a pair
// turns `beta` times in n_ctx_orig positions:
//   n_rot * ln(n_ctx_orig / (2 pi beta)) / (2 ln base)
// low rounds down and high up, clamped to [0, n_rot - 1].
LS_HD float rope_yarn_corr_dim(int64_t n_rot, int32_t n_ctx_orig, float beta, float freq_base) {
  return static_cast<float>(n_rot) * logf(static_cast<float>(n_ctx_orig) / (beta * 2.0f * 3.14159265358979f)) /
         (2.0f * logf(freq_base));
}

// The ramp's ends [low, high] for a rotation of n_rot dims at base freq_base.
LS_HD void rope_yarn_corr_dims(int64_t n_rot, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                               float& low, float& high) {
  low = fmaxf(0.0f, floorf(rope_yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base)));
  high = fminf(static_cast<float>(n_rot - 1), ceilf(rope_yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base)));
}

// The blended angle of pair i: theta_extrap is rope_theta without freq_scale.
// ext_factor 0 is plain (linear) scaling; 1 is full YaRN.
LS_HD float rope_yarn_theta(float theta_extrap, int64_t i, float freq_scale, float ext_factor, float low, float high) {
  const float theta_interp = freq_scale * theta_extrap;
  if (ext_factor == 0.0f) return theta_interp;
  const float y = (static_cast<float>(i) - low) / fmaxf(0.001f, high - low);
  const float ramp_mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * ext_factor;
  return theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
}

// Pair i's angle with or without YaRN: ext_factor 0 is rope_theta's bits.
LS_HD float rope_theta_ext(int32_t pos, int64_t i, int64_t n_rot, float freq_base, float freq_scale, float freq_factor,
                           float ext_factor, float low, float high) {
  if (ext_factor == 0.0f) return rope_theta(pos, i, n_rot, freq_base, freq_scale, freq_factor);
  const float extrap = rope_theta(pos, i, n_rot, freq_base, 1.0f, freq_factor);
  return rope_yarn_theta(extrap, i, freq_scale, ext_factor, low, high);
}

// The magnitude both cos and sin are multiplied by: attn_factor, times YaRN's
// 1 + 0.1 ln(1 / freq_scale) when it extrapolates (ext_factor != 0).
LS_HD float rope_yarn_mscale(float freq_scale, float ext_factor, float attn_factor) {
  return ext_factor != 0.0f ? attn_factor * (1.0f + 0.1f * logf(1.0f / freq_scale)) : attn_factor;
}

// Indices of pair i within a head: llama (adjacent) or neox (split halves).
LS_HD void rope_pair_index(int64_t i, int64_t n_rot, bool neox, int64_t& i0, int64_t& i1) {
  if (neox) {
    i0 = i;
    i1 = i + n_rot / 2;
  } else {
    i0 = 2 * i;
    i1 = 2 * i + 1;
  }
}

// Rotates (x0, x1) by theta in place, scaled by mscale (YaRN's magnitude, which
// cos and sin both carry): (x0 c - x1 s, x0 s + x1 c), c = cos theta * mscale.
LS_HD void rope_rotate(float& x0, float& x1, float theta, float mscale = 1.0f) {
  const float c = cosf(theta) * mscale, s = sinf(theta) * mscale;
  const float a = x0, b = x1;
  x0 = a * c - b * s;
  x1 = a * s + b * c;
}

}  // namespace layerstream::math

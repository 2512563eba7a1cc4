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

// Rotates (x0, x1) by theta in place: (x0 cos - x1 sin, x0 sin + x1 cos).
LS_HD void rope_rotate(float& x0, float& x1, float theta) {
  const float c = cosf(theta), s = sinf(theta);
  const float a = x0, b = x1;
  x0 = a * c - b * s;
  x1 = a * s + b * c;
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

}  // namespace layerstream::math

// RMSNorm of one row, shared by the CPU and CUDA kernels.
//   out[i] = x[i] * rms_inv_scale(sum(x^2), n, eps) * weight[i]
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/math/host_device.h"

namespace layerstream::math {

// 1 / sqrt(sum_sq / n + eps): the factor every element of the row is scaled by.
LS_HD float rms_inv_scale(float sum_sq, int64_t n, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
}

// Whole row, sequential (CPU reference path; the CUDA kernel reduces sum_sq
// across a block and then applies rms_inv_scale itself). out may equal x.
LS_HD void rmsnorm_row(const float* x, const float* weight, float* out, int64_t n, float eps) {
  float sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float s = rms_inv_scale(sum_sq, n, eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s * weight[i];
}

}  // namespace layerstream::math

// Per-row power-of-two scaling of activations for the CUDA 16-bit GEMM path
// (kernels/cuda/matmul.cu, batches of more than kMatvecMaxTokens tokens).
// FP16 holds at most 65504: rounding an activation with |x| >= 65520 to FP16
// gives inf, and the GEMM then returns inf/NaN where the CPU (f32) does not.
// So each row of x is multiplied by 2^-e before the rounding and the GEMM's
// f32 result by 2^e afterwards; both scalings are exact. e puts the row's
// largest magnitude in [2^14, 2^15): half FP16's range is left as headroom,
// and elements down to 2^-28 of the largest stay normal FP16 numbers.
#pragma once

#include <cmath>

#include "kernels/math/host_device.h"

namespace layerstream::math {

// The exponent e for a row whose largest |x| is `max_abs`. 0 for a row of
// zeros and for a row holding inf or NaN (left unscaled so that they
// propagate as they do on the CPU).
LS_HD int f16_row_exponent(float max_abs) {
  if (!(max_abs > 0.0f) || max_abs > 3.4028234663852886e38f) return 0;
  int e = 0;
  frexpf(max_abs, &e);  // max_abs = m * 2^e, m in [0.5, 1)
  return e - 15;        // max_abs * 2^-(e-15) in [2^14, 2^15)
}

}  // namespace layerstream::math

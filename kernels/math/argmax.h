// The greedy-sampling rule shared by the CPU sampler and the CUDA argmax
// kernel, so both pick the same token: the largest logit wins, the lowest
// index on ties, and a NaN logit is never chosen (a NaN compares false with
// everything, so a running best that became NaN would never be replaced and
// would hide every later candidate). When every logit is NaN the caller picks
// token 0.
#pragma once

#include <cstdint>

#include "kernels/math/host_device.h"

namespace layerstream::math {

// True when candidate (v, i) should replace the running best (bv, bi).
// `none` marks "no candidate yet" (for bi) or "no candidate" (for i).
LS_HD bool argmax_better(float v, int64_t i, float bv, int64_t bi, int64_t none) {
  if (i == none || v != v) return false;  // no candidate, or NaN
  if (bi == none) return true;
  return v > bv || (v == bv && i < bi);
}

}  // namespace layerstream::math

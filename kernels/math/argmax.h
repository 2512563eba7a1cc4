// The token-ranking rule shared by every sampler (the CPU kernel sampler,
// SamplerChain and the CUDA argmax kernel), so all pick the same token: the
// larger logit ranks first, the lower id on ties, and a NaN logit ranks after
// every number (a NaN compares false with everything: a running best that
// became NaN would never be replaced, and a comparator built on `>` alone is
// not a strict weak order once a NaN is in the row, which std::sort may
// answer with a crash). When every logit is NaN the caller picks token 0.
#pragma once

#include <cstdint>

#include "kernels/math/host_device.h"

namespace layerstream::math {

// Strict weak order: true when logit a (id ia) ranks before logit b (id ib).
LS_HD bool ranks_before(float a, int64_t ia, float b, int64_t ib) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan != b_nan) return b_nan;  // a number before a NaN
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

// True when candidate (v, i) should replace the running best (bv, bi).
// `none` marks "no candidate yet" (for bi) or "no candidate" (for i).
LS_HD bool argmax_better(float v, int64_t i, float bv, int64_t bi, int64_t none) {
  if (i == none || v != v) return false;  // no candidate, or NaN
  if (bi == none) return true;
  return ranks_before(v, i, bv, bi);
}

// The index of the best-ranked logit of a row (0 when all are NaN or n is 0).
inline int64_t argmax_row(const float* logits, int64_t n) {
  int64_t best = n;
  for (int64_t i = 0; i < n; ++i)
    if (argmax_better(logits[i], i, best == n ? 0.0f : logits[best], best, n)) best = i;
  return best == n ? 0 : best;
}

}  // namespace layerstream::math

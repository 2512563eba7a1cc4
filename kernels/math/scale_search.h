// Scale searches for block quantisation: for one group of values, the scale
// (and for affine groups the offset) and integer codes that make the weighted
// squared error  sum_i w[i] * (x[i] - value(code[i]))^2  small. They follow
// the searches of llama.cpp's quantiser (ggml-quants.c: make_qx_quants,
// make_q3_quants, make_qkx2/3_quants, make_qp_quants and the IQ4 search), so
// files we make are as good as llama-quantize's: try a handful of inverse
// scales around the one that maps the extreme to the end of the code range,
// and keep the least-squares scale of whichever code assignment fits best.
//
// Weights: the caller's importance of each value (an importance matrix
// column times a magnitude term), or, where a function says so, null for
// the function's default. Host only; pure functions, thread-safe.
#pragma once

#include <cstdint>

namespace layerstream::math {

// Below this largest magnitude a group is all zeros (codes 0, scale 0).
inline constexpr float kGroupMaxEps = 1e-15f;

// x[i] ~ scale * (L[i] - nmax), L[i] in 0 .. 2 nmax - 1: the value of
// largest magnitude takes the most negative code. w null: x^2.
// Returns the scale (negative when the extreme value is positive). 19 inverse
// scales -(nmax + 0.1 k) / max, k = -9..9, each refitted by least squares.
float search_symmetric(int n, int nmax, const float* x, const float* w, uint8_t* L);

// As search_symmetric with weights x^2, refined by moving one code at a time
// to its best value under the current least-squares scale (up to 5 rounds).
float search_symmetric_refined(int n, int nmax, const float* x, uint8_t* L);

// x[i] ~ scale * L[i] - min, L[i] in 0..nmax, min >= 0 (the group's offset is
// never positive). w must not be null. Starts from the range fit, then tries
// inverse scales (rmin + rdelta k + nmax) / (max - min), k = 0..nstep, each
// with the least-squares scale and offset; use_mad weighs |error| instead of
// its square when comparing. Returns the scale; *the_min gets min.
struct AffineSearch {
  float rmin;
  float rdelta;
  int nstep;
  bool use_mad;
};
float search_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min,
                    const AffineSearch& search);

// Non-negative values (a block's sub-scales) as scale * L[i], L in 0..nmax,
// with weights w (not null): 9 scales around nmax / max, then up to 5 rounds
// moving single codes. Returns the scale (0 when every x is 0).
float search_positive(int n, int nmax, const float* x, const float* w, uint8_t* L);

// x[i] ~ d * iq4_value(L[i]) (the IQ4 codebook): from d = max / 127, tries
// 2 ntry + 1 inverse scales (k - 127) / max, k = -ntry..ntry, keeping the
// least-squares d of the best. w null: x^2. Returns d (0 for an all-zero group).
float search_iq4(int n, const float* x, const float* w, int ntry, uint8_t* L);

// Index of the IQ4 codebook entry nearest to v (ties to the lower index).
int nearest_iq4_index(float v);

// v rounded to nearest (ties to even, as llama.cpp's quantisers round) and
// clamped to lo..hi; NaN gives lo. Clamping first keeps the conversion to int
// defined for any input.
inline int code_in(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v > static_cast<float>(hi)) return hi;
  return static_cast<int>(__builtin_rintf(v));
}

}  // namespace layerstream::math

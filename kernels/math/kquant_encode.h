// Encoders (quantisers) for the Q5, K-quant and IQ4 block types of
// kquant_blocks.h. Host only; used by `layerstream quantize`, the example
// model writer and the tests. Pure functions, thread-safe.
//
// The searches are llama.cpp's (scale_search.h): without importance weights
// each type takes the path of llama.cpp's quantize_row_*_ref (the magnitude
// weighting each type uses there); with them (an importance matrix), the path
// of quantize_row_*_impl, where each element's weight is its importance times
// sqrt(sigma^2 + x^2). Sub-block scales are then quantised and every code
// chosen again against the stored (f16-rounded, quantised) scales, so the
// block decodes to the values the search fitted. All-zero input gives zero
// scales; always valid blocks.
#pragma once

#include "kernels/math/kquant_blocks.h"
#include "kernels/math/quant_blocks.h"

namespace layerstream::math {

// Q5_0, Q5_1 (x: 32 floats): round to nearest, llama.cpp's reference.
BlockQ5_0 quantize_block_q5_0(const float* x);
BlockQ5_1 quantize_block_q5_1(const float* x);

// The 32-element types with importance weights qw (32, not null), as
// llama.cpp's quantize_row_q4_0_impl and kin: element weights
// qw * sqrt(sigma2 + x^2), sigma2 the mean of x^2 over the whole row;
// symmetric search for Q4_0 / Q5_0, affine for Q4_1 / Q5_1.
BlockQ4_0 quantize_block_q4_0_weighted(const float* x, const float* qw, float sigma2);
BlockQ4_1 quantize_block_q4_1_weighted(const float* x, const float* qw, float sigma2);
BlockQ5_0 quantize_block_q5_0_weighted(const float* x, const float* qw, float sigma2);
BlockQ5_1 quantize_block_q5_1_weighted(const float* x, const float* qw, float sigma2);

// x: Block::kElems floats. qw: Block::kElems importance weights (>= 0), or
// null for none.
BlockQ2_K quantize_block_q2_k(const float* x, const float* qw = nullptr);
BlockQ3_K quantize_block_q3_k(const float* x, const float* qw = nullptr);
BlockQ4_K quantize_block_q4_k(const float* x, const float* qw = nullptr);
BlockQ5_K quantize_block_q5_k(const float* x, const float* qw = nullptr);
BlockQ6_K quantize_block_q6_k(const float* x, const float* qw = nullptr);
BlockIQ4_NL quantize_block_iq4_nl(const float* x, const float* qw = nullptr);
BlockIQ4_XS quantize_block_iq4_xs(const float* x, const float* qw = nullptr);
// MXFP4 as llama.cpp's reference encoder: the exponent from the block's
// largest magnitude (2^floor(log2 amax) maps to code 8, i.e. 4.0), each value
// to its nearest code (ties: the lower index). qw is not used: with a
// power-of-two scale fixed by the maximum there is no scale to search.
BlockMXFP4 quantize_block_mxfp4(const float* x, const float* qw = nullptr);

}  // namespace layerstream::math

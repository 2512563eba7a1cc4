// Encoders (quantisers) for the Q5, K-quant and IQ4 block types of
// kquant_blocks.h. Host only; used by the model writer and the tests.
//
// Round to nearest on the grid the block actually stores: sub-block scales
// are quantised first, then every code is chosen against the decoded
// (f16-rounded, quantised) scale and offset, with a search of the
// neighbouring sub-scales for the smallest squared error. Always valid
// blocks; all-zero input gives zero scales. Not as refined as llama.cpp's
// importance-weighted quantiser, but the same formats.
#pragma once

#include "kernels/math/kquant_blocks.h"

namespace layerstream::math {

// x: Block::kElems floats.
BlockQ5_0 quantize_block_q5_0(const float* x);
BlockQ5_1 quantize_block_q5_1(const float* x);
BlockQ2_K quantize_block_q2_k(const float* x);
BlockQ3_K quantize_block_q3_k(const float* x);
BlockQ4_K quantize_block_q4_k(const float* x);
BlockQ5_K quantize_block_q5_k(const float* x);
BlockQ6_K quantize_block_q6_k(const float* x);
BlockIQ4_NL quantize_block_iq4_nl(const float* x);
BlockIQ4_XS quantize_block_iq4_xs(const float* x);

}  // namespace layerstream::math

// Quarter-block decoding for the coalesced CUDA matvec of Q8_0 / Q4_0 / Q4_1
// (kernels/cuda/matvec_quarter.cu): four lanes split one 32-element block,
// lane share k (0..3) decoding 8 of its elements, so a warp reads 8 whole
// blocks and 256 consecutive activations per step instead of each lane
// walking its own block 128 bytes away from its neighbours' activations.
// Quarter k holds, in order:
//   Q8_0:       elements 8k .. 8k+7            (qs[8k .. 8k+7])
//   Q4_0, Q4_1: elements 4k .. 4k+3, then 16+4k .. 16+4k+3
//               (the low, then the high nibbles of qs[4k .. 4k+3])
// Each decoded value equals the block decoder's (quant_blocks.h) exactly.
#pragma once

#include "kernels/math/host_device.h"
#include "kernels/math/quant_blocks.h"

namespace layerstream::math {

constexpr int kQuarterElems = 8;

// Element of the block held at position j (0..7) of quarter k.
LS_HD int q8_0_quarter_element(int k, int j) { return 8 * k + j; }
LS_HD int q4_quarter_element(int k, int j) { return j < 4 ? 4 * k + j : kQK / 2 + 4 * k + (j - 4); }

LS_HD void decode_quarter(const BlockQ8_0& b, int k, float* w) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQuarterElems; ++j) w[j] = d * static_cast<float>(b.qs[8 * k + j]);
}
LS_HD void decode_quarter(const BlockQ4_0& b, int k, float* w) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 4; ++j) {
    const uint8_t q = b.qs[4 * k + j];
    w[j] = d * static_cast<float>((q & 0x0F) - 8);
    w[4 + j] = d * static_cast<float>((q >> 4) - 8);
  }
}
LS_HD void decode_quarter(const BlockQ4_1& b, int k, float* w) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int j = 0; j < 4; ++j) {
    const uint8_t q = b.qs[4 * k + j];
    w[j] = d * static_cast<float>(q & 0x0F) + m;
    w[4 + j] = d * static_cast<float>(q >> 4) + m;
  }
}

// Offsets (in elements, from the block's first activation) of the two runs of
// four consecutive activations quarter k multiplies.
LS_HD int quarter_x_run(const BlockQ8_0*, int k, int run) { return 8 * k + 4 * run; }
LS_HD int quarter_x_run(const BlockQ4_0*, int k, int run) { return run == 0 ? 4 * k : kQK / 2 + 4 * k; }
LS_HD int quarter_x_run(const BlockQ4_1*, int k, int run) { return run == 0 ? 4 * k : kQK / 2 + 4 * k; }

}  // namespace layerstream::math

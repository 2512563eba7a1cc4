// GGUF quantised block layouts (ggml-common.h) and their exact decoders and
// reference encoders, shared by the CPU kernels, the CUDA kernels, the model
// writer and the tests.
//
// Q8_0: 32 elements: d (f16), qs[32] (int8);          x[i] = d * qs[i]
// Q4_0: 32 elements: d (f16), qs[16] (two nibbles);    x[i] = d * (nibble - 8)
// Q4_1: 32 elements: d (f16), m (f16), qs[16];         x[i] = d * nibble + m
// In Q4 blocks element j (0..15) is the low nibble of qs[j] and element
// j + 16 the high nibble of qs[j].
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/math/fp16.h"
#include "kernels/math/host_device.h"

namespace layerstream::math {

constexpr int kQK = 32;  // elements per Q8_0/Q4_0/Q4_1 block

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block must be 20 bytes");

// ---- decoding: element j of a block ----------------------------------------
LS_HD float q8_0_value(const BlockQ8_0& b, int j) { return f16_to_f32(b.d) * static_cast<float>(b.qs[j]); }

LS_HD int q4_nibble(const uint8_t* qs, int j) { return j < kQK / 2 ? (qs[j] & 0x0F) : (qs[j - kQK / 2] >> 4); }

LS_HD float q4_0_value(const BlockQ4_0& b, int j) {
  return f16_to_f32(b.d) * static_cast<float>(q4_nibble(b.qs, j) - 8);
}

LS_HD float q4_1_value(const BlockQ4_1& b, int j) {
  return f16_to_f32(b.d) * static_cast<float>(q4_nibble(b.qs, j)) + f16_to_f32(b.m);
}

// Whole-block decoders (out: kQK floats).
LS_HD void dequantize_block(const BlockQ8_0& b, float* out) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) out[j] = d * static_cast<float>(b.qs[j]);
}
LS_HD void dequantize_block(const BlockQ4_0& b, float* out) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    out[j] = d * static_cast<float>((b.qs[j] & 0x0F) - 8);
    out[j + kQK / 2] = d * static_cast<float>((b.qs[j] >> 4) - 8);
  }
}
LS_HD void dequantize_block(const BlockQ4_1& b, float* out) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int j = 0; j < kQK / 2; ++j) {
    out[j] = d * static_cast<float>(b.qs[j] & 0x0F) + m;
    out[j + kQK / 2] = d * static_cast<float>(b.qs[j] >> 4) + m;
  }
}

// ---- reference encoders (ggml quantize_row_*_ref) ---------------------------
// in: kQK floats. Host only: used by the writer and tests.
inline BlockQ8_0 quantize_block_q8_0(const float* x) {
  float amax = 0;
  for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  BlockQ8_0 b;
  b.d = f32_to_f16(d);
  for (int j = 0; j < kQK; ++j) b.qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
  return b;
}

inline BlockQ4_0 quantize_block_q4_0(const float* x) {
  float amax = 0, max = 0;  // max keeps the sign of the largest-magnitude value
  for (int j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  BlockQ4_0 b;
  b.d = f32_to_f16(d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f));
    const int q1 = static_cast<int>(static_cast<int8_t>(x[j + kQK / 2] * id + 8.5f));
    const uint8_t lo = static_cast<uint8_t>(q0 < 15 ? q0 : 15);
    const uint8_t hi = static_cast<uint8_t>(q1 < 15 ? q1 : 15);
    b.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return b;
}

inline BlockQ4_1 quantize_block_q4_1(const float* x) {
  float min = x[0], max = x[0];
  for (int j = 1; j < kQK; ++j) {
    min = std::fmin(min, x[j]);
    max = std::fmax(max, x[j]);
  }
  const float d = (max - min) / 15.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  BlockQ4_1 b;
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(min);
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f));
    const int q1 = static_cast<int>(static_cast<int8_t>((x[j + kQK / 2] - min) * id + 0.5f));
    const uint8_t lo = static_cast<uint8_t>(q0 < 15 ? q0 : 15);
    const uint8_t hi = static_cast<uint8_t>(q1 < 15 ? q1 : 15);
    b.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return b;
}

}  // namespace layerstream::math

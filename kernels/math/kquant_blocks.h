// GGUF block layouts of the Q5 types, the K-quants, the IQ4 types and MXFP4
// (ggml-common.h), decoded exactly, shared by the CPU kernels, the CUDA
// kernels, the model writer and the tests. Layouts: docs/GGUF.md.
//
// Every type decodes through one form: a 32-element sub-block as int8 codes
// q[32] plus, per half (elements 0-15 and 16-31), a float scale and offset:
//   x[j] = scale[j / 16] * q[j] + offset[j / 16]
// The products scale * q are exact in f32 (at most 24 significant bits:
// f16 d x 8-bit sub-scale x code) so the decoded value is rounded once, in
// the add, and an FMA gives the same bits. This is the value llama.cpp's
// dequantize_row_* computes.
//
// Each block type has kElems (elements per block) and kSubs = kElems / 32;
// unpack_sub(block, s, q, scale, offset) fills the form for sub-block s.
#pragma once

#include <cstdint>

#include "kernels/math/fp16.h"
#include "kernels/math/host_device.h"

namespace layerstream::math {

constexpr int kQK_K = 256;  // elements per K-quant / IQ4_XS super-block

struct BlockQ5_0 {
  static constexpr int kElems = 32;
  uint16_t d;
  uint8_t qh[4];   // bit j: 5th bit of element j
  uint8_t qs[16];  // low nibble: element j, high nibble: element j + 16
};
struct BlockQ5_1 {
  static constexpr int kElems = 32;
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ2_K {
  static constexpr int kElems = kQK_K;
  uint8_t scales[16];  // per 16 elements: low nibble scale, high nibble min
  uint8_t qs[64];      // 2-bit codes
  uint16_t d, dmin;
};
struct BlockQ3_K {
  static constexpr int kElems = kQK_K;
  uint8_t hmask[32];   // 3rd bit of the codes (set: code as is, clear: code - 4)
  uint8_t qs[64];      // low 2 bits of the codes
  uint8_t scales[12];  // 16 6-bit scales (offset by 32)
  uint16_t d;
};
struct BlockQ4_K {
  static constexpr int kElems = kQK_K;
  uint16_t d, dmin;
  uint8_t scales[12];  // 8 6-bit scales and 8 6-bit mins
  uint8_t qs[128];
};
struct BlockQ5_K {
  static constexpr int kElems = kQK_K;
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // 5th bits
  uint8_t qs[128];
};
struct BlockQ6_K {
  static constexpr int kElems = kQK_K;
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // per 16 elements
  uint16_t d;
};
struct BlockIQ4_NL {
  static constexpr int kElems = 32;
  uint16_t d;
  uint8_t qs[16];  // indices into kIq4Values
};
struct BlockIQ4_XS {
  static constexpr int kElems = kQK_K;
  uint16_t d;
  uint16_t scales_h;   // high 2 bits of the 8 6-bit sub-scales
  uint8_t scales_l[4]; // low 4 bits
  uint8_t qs[128];
};
// MXFP4 (OCP microscaling, gpt-oss's experts): 32 e2m1 values sharing a
// power-of-two scale. e is an e8m0 exponent; the codes are twice the e2m1
// values, so element = code * 2^(e - 128).
struct BlockMXFP4 {
  static constexpr int kElems = 32;
  uint8_t e;
  uint8_t qs[16];  // low nibble: element j, high nibble: element j + 16 (indices into mxfp4_value)
};
static_assert(sizeof(BlockMXFP4) == 17, "MXFP4 block size");
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24, "Q5 block sizes");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144, "K block sizes");
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210, "K block sizes");
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136, "IQ4 block sizes");

// The IQ4 codebook: index -> code (non-uniform, denser near zero).
LS_HD int8_t iq4_value(int i) {
  constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return kIq4Values[i];
}

// The e2m1 codebook doubled (so every code is an integer): sign bit 3, then
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 times two.
LS_HD int8_t mxfp4_value(int i) {
  constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return kValues[i];
}

// 2^(e - 128): an e8m0 exponent with the halving of mxfp4_value folded in,
// built from its bits (exact; e < 2 are the f32 subnormals 2^-128, 2^-127).
LS_HD float e8m0_half_to_f32(uint8_t e) {
  const uint32_t bits = e < 2 ? (uint32_t{0x00200000} << e) : (static_cast<uint32_t>(e - 1) << 23);
  return f32_from_bits(bits);
}

// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
LS_HD void k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q3_K: 6-bit scale i (0..15) minus 32. Scales 0-7 keep their low nibbles in
// bytes 0-7, scales 8-15 in the high nibbles of bytes 0-7; the 2 high bits of
// scale i are bits 2*(i/4) of byte 8 + i%4.
LS_HD int q3_scale(const uint8_t* s, int i) {
  const int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
  const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// 32-bit little-endian read of 4 bytes (alignment-free).
LS_HD uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// ---- unpack_sub: sub-block s -> codes, scale and offset per half ------------
LS_HD void unpack_sub(const BlockQ5_0& b, int /*s*/, int8_t* q, float* scale, float* offset) {
  const uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(((b.qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16);
    q[j + 16] = static_cast<int8_t>(((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
  }
  scale[0] = scale[1] = f16_to_f32(b.d);
  offset[0] = offset[1] = 0.0f;
}

LS_HD void unpack_sub(const BlockQ5_1& b, int /*s*/, int8_t* q, float* scale, float* offset) {
  const uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>((b.qs[j] & 0xF) | (((qh >> j) & 1) << 4));
    q[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
  }
  scale[0] = scale[1] = f16_to_f32(b.d);
  offset[0] = offset[1] = f16_to_f32(b.m);
}

// Q2_K: sub-block s = 4 * n + k (n: 128-element half, k: bit pair) holds
// qs[32 n + l] >> 2k for l in 0..31, with scales 8n + 2k (first 16) and +1.
LS_HD void unpack_sub(const BlockQ2_K& b, int s, int8_t* q, float* scale, float* offset) {
  const int n = s / 4, shift = 2 * (s % 4);
  const uint8_t* qs = b.qs + 32 * n;
  for (int l = 0; l < 32; ++l) q[l] = static_cast<int8_t>((qs[l] >> shift) & 3);
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int h = 0; h < 2; ++h) {
    const uint8_t sc = b.scales[2 * s + h];
    scale[h] = d * static_cast<float>(sc & 0xF);
    offset[h] = -(dmin * static_cast<float>(sc >> 4));
  }
}

// Q3_K: like Q2_K for the low bits; hmask bit s of byte l is the code's 3rd
// bit (clear means the code is 4 lower).
LS_HD void unpack_sub(const BlockQ3_K& b, int s, int8_t* q, float* scale, float* offset) {
  const int n = s / 4, shift = 2 * (s % 4);
  const uint8_t* qs = b.qs + 32 * n;
  for (int l = 0; l < 32; ++l) {
    const int hi = (b.hmask[l] >> s) & 1;
    q[l] = static_cast<int8_t>(((qs[l] >> shift) & 3) - (hi ? 0 : 4));
  }
  const float d = f16_to_f32(b.d);
  for (int h = 0; h < 2; ++h) {
    scale[h] = d * static_cast<float>(q3_scale(b.scales, 2 * s + h));
    offset[h] = 0.0f;
  }
}

// Q4_K: sub-block s uses the low (s even) or high (s odd) nibbles of qs[32 (s/2) ..].
LS_HD void unpack_sub(const BlockQ4_K& b, int s, int8_t* q, float* scale, float* offset) {
  const uint8_t* qs = b.qs + 32 * (s / 2);
  const int shift = 4 * (s % 2);
  for (int l = 0; l < 32; ++l) q[l] = static_cast<int8_t>((qs[l] >> shift) & 0xF);
  int sc, m;
  k4_scale_min(b.scales, s, &sc, &m);
  scale[0] = scale[1] = f16_to_f32(b.d) * static_cast<float>(sc);
  offset[0] = offset[1] = -(f16_to_f32(b.dmin) * static_cast<float>(m));
}

// Q5_K: Q4_K plus bit s of qh[l] as the code's 5th bit.
LS_HD void unpack_sub(const BlockQ5_K& b, int s, int8_t* q, float* scale, float* offset) {
  const uint8_t* qs = b.qs + 32 * (s / 2);
  const int shift = 4 * (s % 2);
  for (int l = 0; l < 32; ++l) {
    q[l] = static_cast<int8_t>(((qs[l] >> shift) & 0xF) | (((b.qh[l] >> s) & 1) << 4));
  }
  int sc, m;
  k4_scale_min(b.scales, s, &sc, &m);
  scale[0] = scale[1] = f16_to_f32(b.d) * static_cast<float>(sc);
  offset[0] = offset[1] = -(f16_to_f32(b.dmin) * static_cast<float>(m));
}

// Q6_K: sub-block s = 4 n + k: low nibbles of ql[64 n + 32 (k % 2) + l]
// (k < 2) or high nibbles (k >= 2), high bits (qh[32 n + l] >> 2k) & 3, code - 32;
// scales 8 n + 2 k and +1.
LS_HD void unpack_sub(const BlockQ6_K& b, int s, int8_t* q, float* scale, float* offset) {
  const int n = s / 4, k = s % 4;
  const uint8_t* ql = b.ql + 64 * n + 32 * (k % 2);
  const uint8_t* qh = b.qh + 32 * n;
  const int lshift = 4 * (k / 2), hshift = 2 * k;
  for (int l = 0; l < 32; ++l) {
    q[l] = static_cast<int8_t>((((ql[l] >> lshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4)) - 32);
  }
  const float d = f16_to_f32(b.d);
  for (int h = 0; h < 2; ++h) {
    scale[h] = d * static_cast<float>(b.scales[2 * s + h]);
    offset[h] = 0.0f;
  }
}

// 16 bytes of 4-bit indices (element j in the low nibble of qs[j], j + 16
// in the high one) through a codebook: IQ4's (iq4_value) or MXFP4's (mxfp4_value).
LS_HD void codebook_codes(const uint8_t* qs, bool mxfp4, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = mxfp4 ? mxfp4_value(qs[j] & 0xF) : iq4_value(qs[j] & 0xF);
    q[j + 16] = mxfp4 ? mxfp4_value(qs[j] >> 4) : iq4_value(qs[j] >> 4);
  }
}

LS_HD void unpack_sub(const BlockIQ4_NL& b, int /*s*/, int8_t* q, float* scale, float* offset) {
  codebook_codes(b.qs, false, q);
  scale[0] = scale[1] = f16_to_f32(b.d);
  offset[0] = offset[1] = 0.0f;
}

// MXFP4: codes from the nibbles, one power-of-two scale (code * scale is exact).
LS_HD void unpack_sub(const BlockMXFP4& b, int /*s*/, int8_t* q, float* scale, float* offset) {
  codebook_codes(b.qs, true, q);
  scale[0] = scale[1] = e8m0_half_to_f32(b.e);
  offset[0] = offset[1] = 0.0f;
}

// IQ4_XS: sub-block s is an IQ4_NL block (nibbles of qs[16 s ..]) with scale
// d * (ls - 32), ls = low nibble s of scales_l | 2 bits s of scales_h << 4.
LS_HD void unpack_sub(const BlockIQ4_XS& b, int s, int8_t* q, float* scale, float* offset) {
  codebook_codes(b.qs + 16 * s, false, q);
  const int ls = ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
  scale[0] = scale[1] = f16_to_f32(b.d) * static_cast<float>(ls - 32);
  offset[0] = offset[1] = 0.0f;
}

// ---- decoders built on unpack_sub --------------------------------------------
// out: 32 floats, elements 32 s .. 32 s + 31 of the block.
template <typename Block>
LS_HD void dequantize_sub(const Block& b, int s, float* out) {
  int8_t q[32];
  float scale[2], offset[2];
  unpack_sub(b, s, q, scale, offset);
  for (int j = 0; j < 32; ++j) out[j] = scale[j >> 4] * static_cast<float>(q[j]) + offset[j >> 4];
}

// out: Block::kElems floats.
template <typename Block>
LS_HD void dequantize_kblock(const Block& b, float* out) {
  for (int s = 0; s < Block::kElems / 32; ++s) dequantize_sub(b, s, out + 32 * s);
}

}  // namespace layerstream::math

// Float64 decoders of the Q5, K-quant, IQ4 and MXFP4 block types, written from the
// format description (docs/GGUF.md, llama.cpp's ggml-common.h), reading raw
// little-endian bytes by offset: element j of a block, computed on its own,
// without the library's structs or its sub-block unpacking.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/math/ggml_type.h"

namespace layerstream::kernels::testing {

inline double kspec_half(const uint8_t* p) {
  const uint16_t h = static_cast<uint16_t>(p[0] | (p[1] << 8));
  const int e = (h >> 10) & 31, m = h & 1023;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h >> 15) ? -mag : mag;
}

inline int kspec_iq4(int i) {
  static const int kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return kValues[i];
}

// An OCP e2m1 value from its 4 bits: sign, 2 exponent bits (bias 1), 1 mantissa bit.
inline double kspec_e2m1(int bits) {
  const int e = (bits >> 1) & 3, m = bits & 1;
  const double mag = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1);
  return (bits & 8) ? -mag : mag;
}

// Q4_K/Q5_K: 6-bit scale (which = 0) or min (which = 1) of sub-block s from the 12 bytes at p.
inline int kspec_k4(const uint8_t* p, int s, int which) {
  if (s < 4) return p[s + 4 * which] & 63;
  const int low = which == 0 ? (p[s + 4] & 15) : (p[s + 4] >> 4);
  const int high = which == 0 ? (p[s - 4] >> 6) : (p[s] >> 6);
  return low | (high << 4);
}

// Element j of the block at b.
inline double kspec_element(GgmlType t, const uint8_t* b, int j) {
  const int s = j / 32, l = j % 32;  // 32-element sub-block and position in it
  switch (t) {
    case GgmlType::Q5_0:
    case GgmlType::Q5_1: {
      // d [, m], qh (4 bytes: bit j = 5th bit of element j), qs (16 bytes: element j in the
      // low nibble of qs[j], element j + 16 in the high nibble)
      const int hdr = t == GgmlType::Q5_0 ? 2 : 4;
      const uint32_t qh = b[hdr] | (b[hdr + 1] << 8) | (b[hdr + 2] << 16) | (static_cast<uint32_t>(b[hdr + 3]) << 24);
      const uint8_t byte = b[hdr + 4 + j % 16];
      const int q = (j < 16 ? byte & 15 : byte >> 4) | (((qh >> j) & 1) << 4);
      return t == GgmlType::Q5_0 ? kspec_half(b) * (q - 16) : kspec_half(b) * q + kspec_half(b + 2);
    }
    case GgmlType::Q2_K: {
      // scales[16] (low nibble scale, high nibble min per 16 elements), qs[64], d, dmin.
      // Element j: 128-element half n, bit pair k, byte qs[32 n + l].
      const int n = j / 128, k = (j % 128) / 32;
      const int q = (b[16 + 32 * n + l] >> (2 * k)) & 3;
      const int sc = b[j / 16];
      return kspec_half(b + 80) * (sc & 15) * q - kspec_half(b + 82) * (sc >> 4);
    }
    case GgmlType::Q3_K: {
      // hmask[32], qs[64], scales[12], d. Low 2 bits like Q2_K, bit s of hmask[l] set:
      // code as is, clear: code - 4. 6-bit scales (minus 32): low nibbles of bytes 0..7 for
      // scales 0..7, high nibbles for 8..15; 2 high bits of scale g at byte 8 + g % 4, bits 2 (g / 4).
      const int n = j / 128, k = (j % 128) / 32, g = j / 16;
      const int low = (b[32 + 32 * n + l] >> (2 * k)) & 3;
      const int q = low - (((b[l] >> s) & 1) ? 0 : 4);
      const uint8_t* sc = b + 96;
      const int lo4 = g < 8 ? (sc[g] & 15) : (sc[g - 8] >> 4);
      const int hi2 = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
      return kspec_half(b + 108) * ((lo4 | (hi2 << 4)) - 32) * q;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      // d, dmin, scales[12], [qh[32],] qs[128]: sub-block s in the low (s even) or high (s odd)
      // nibbles of qs[32 (s / 2) + l]; Q5_K's 5th bit is bit s of qh[l].
      const bool five = t == GgmlType::Q5_K;
      const uint8_t* qs = b + (five ? 48 : 16);
      int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
      if (five) q |= ((b[16 + l] >> s) & 1) << 4;
      return kspec_half(b) * kspec_k4(b + 4, s, 0) * q - kspec_half(b + 2) * kspec_k4(b + 4, s, 1);
    }
    case GgmlType::Q6_K: {
      // ql[128], qh[64], scales[16] (int8), d. Element j: half n, quarter k, position l:
      // low 4 bits: nibble k / 2 of ql[64 n + 32 (k % 2) + l]; high 2 bits: bits 2k of qh[32 n + l].
      const int n = j / 128, k = (j % 128) / 32;
      const int lo = (b[64 * n + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15;
      const int hi = (b[128 + 32 * n + l] >> (2 * k)) & 3;
      const int sc = static_cast<int8_t>(b[192 + j / 16]);
      return kspec_half(b + 208) * sc * ((lo | (hi << 4)) - 32);
    }
    case GgmlType::IQ4_NL: {
      const uint8_t byte = b[2 + j % 16];
      return kspec_half(b) * kspec_iq4(j < 16 ? byte & 15 : byte >> 4);
    }
    case GgmlType::IQ4_XS: {
      // d, scales_h (u16: 2 bits per sub-block), scales_l[4] (nibble per sub-block), qs[128]
      // (sub-block s = an IQ4_NL block's nibbles at qs[16 s ..]).
      const int sh = b[2] | (b[3] << 8);
      const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | (((sh >> (2 * s)) & 3) << 4);
      const uint8_t byte = b[8 + 16 * s + l % 16];
      return kspec_half(b) * (ls - 32) * kspec_iq4(l < 16 ? byte & 15 : byte >> 4);
    }
    case GgmlType::MXFP4: {
      // e (e8m0: 2^(e - 127)), qs[16] (element j in the low nibble of qs[j], j + 16 in the high one)
      const uint8_t byte = b[1 + j % 16];
      return std::ldexp(kspec_e2m1(j < 16 ? byte & 15 : byte >> 4), b[0] - 127);
    }
    default: return std::nan("");
  }
}

// Byte offsets of the e8m0 exponent fields of a block, and the largest
// exponent whose every value is a finite f32 (12 x 2^(e - 128) < 2^128).
inline std::vector<int> kspec_e8m0_fields(GgmlType t) { return t == GgmlType::MXFP4 ? std::vector<int>{0} : std::vector<int>{}; }
constexpr int kSpecMaxFiniteE8m0 = 252;

// Byte offsets of the f16 scale fields of a block (for tests that plant extreme scales).
inline std::vector<int> kspec_half_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q5_0: return {0};
    case GgmlType::Q5_1: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q6_K: return {208};
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS: return {0};
    default: return {};
  }
}

inline std::vector<GgmlType> kquant_types() {
  return {GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
          GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};
}

}  // namespace layerstream::kernels::testing

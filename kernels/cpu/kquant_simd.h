// AVX2 unpacking of one 32-element sub-block of the kquant_blocks.h types into
// 32 int8 codes plus a scale and offset per half (the same form as
// math::unpack_sub, bit for bit; the tests compare both with the float64 spec
// decoders). Included by kquant_avx2.cpp and kquant_avx512.cpp only: every
// function carries the AVX2 target attribute and is only called after
// avx2::supported().
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstring>

#include "kernels/math/kquant_blocks.h"

#define LS_KQ_AVX2 __attribute__((target("avx2,fma,f16c"))) inline

namespace layerstream::kernels::cpu::kquant_simd {

LS_KQ_AVX2 __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Byte j (0..31) of the result: bits `shift`.. of byte j of v, masked.
LS_KQ_AVX2 __m256i bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

// 16 bytes -> 32 nibbles: low nibbles in bytes 0..15, high nibbles in 16..31.
LS_KQ_AVX2 __m256i nibbles16(const uint8_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m), _mm_and_si128(raw, m));
}

// Bit j of a 32-bit mask -> 0x10 in byte j (else 0).
LS_KQ_AVX2 __m256i bit16_of_mask(uint32_t m) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                        3, 3, 3, 3, 3, 3);
  const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(m)), shuf), sel);
  return _mm256_and_si256(_mm256_cmpeq_epi8(v, sel), _mm256_set1_epi8(0x10));
}

// IQ4 codebook lookup of 32 indices (0..15).
LS_KQ_AVX2 __m256i iq4_lookup(__m256i idx) {
  const __m256i table = _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
                                         -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
  return _mm256_shuffle_epi8(table, idx);
}

// MXFP4 codebook lookup of 32 indices (0..15): twice the e2m1 values.
LS_KQ_AVX2 __m256i mxfp4_lookup(__m256i idx) {
  const __m256i table = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
                                         0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  return _mm256_shuffle_epi8(table, idx);
}

LS_KQ_AVX2 float half(uint16_t h) { return _cvtsh_ss(h); }

// ---- codes(block, s, scale, offset): sub-block s as 32 int8 codes ------------
LS_KQ_AVX2 __m256i codes(const math::BlockQ5_0& b, int, float* scale, float* offset) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  scale[0] = scale[1] = half(b.d);
  offset[0] = offset[1] = 0.0f;
  return _mm256_sub_epi8(_mm256_or_si256(nibbles16(b.qs), bit16_of_mask(qh)), _mm256_set1_epi8(16));
}

LS_KQ_AVX2 __m256i codes(const math::BlockQ5_1& b, int, float* scale, float* offset) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  scale[0] = scale[1] = half(b.d);
  offset[0] = offset[1] = half(b.m);
  return _mm256_or_si256(nibbles16(b.qs), bit16_of_mask(qh));
}

LS_KQ_AVX2 __m256i codes(const math::BlockQ2_K& b, int s, float* scale, float* offset) {
  const float d = half(b.d), dmin = half(b.dmin);
  for (int h = 0; h < 2; ++h) {
    const uint8_t sc = b.scales[2 * s + h];
    scale[h] = d * static_cast<float>(sc & 0xF);
    offset[h] = -(dmin * static_cast<float>(sc >> 4));
  }
  return bits(load32(b.qs + 32 * (s / 4)), 2 * (s % 4), 3);
}

LS_KQ_AVX2 __m256i codes(const math::BlockQ3_K& b, int s, float* scale, float* offset) {
  const float d = half(b.d);
  for (int h = 0; h < 2; ++h) {
    scale[h] = d * static_cast<float>(math::q3_scale(b.scales, 2 * s + h));
    offset[h] = 0.0f;
  }
  const __m256i low = bits(load32(b.qs + 32 * (s / 4)), 2 * (s % 4), 3);
  // hmask bit s clear: code - 4
  const __m256i high = bits(load32(b.hmask), s, 1);
  return _mm256_sub_epi8(low, _mm256_andnot_si256(_mm256_slli_epi16(high, 2), _mm256_set1_epi8(4)));
}

LS_KQ_AVX2 __m256i codes(const math::BlockQ4_K& b, int s, float* scale, float* offset) {
  int sc, m;
  math::k4_scale_min(b.scales, s, &sc, &m);
  scale[0] = scale[1] = half(b.d) * static_cast<float>(sc);
  offset[0] = offset[1] = -(half(b.dmin) * static_cast<float>(m));
  return bits(load32(b.qs + 32 * (s / 2)), 4 * (s % 2), 0xF);
}

LS_KQ_AVX2 __m256i codes(const math::BlockQ5_K& b, int s, float* scale, float* offset) {
  int sc, m;
  math::k4_scale_min(b.scales, s, &sc, &m);
  scale[0] = scale[1] = half(b.d) * static_cast<float>(sc);
  offset[0] = offset[1] = -(half(b.dmin) * static_cast<float>(m));
  const __m256i lo = bits(load32(b.qs + 32 * (s / 2)), 4 * (s % 2), 0xF);
  return _mm256_or_si256(lo, _mm256_slli_epi16(bits(load32(b.qh), s, 1), 4));
}

LS_KQ_AVX2 __m256i codes(const math::BlockQ6_K& b, int s, float* scale, float* offset) {
  const int n = s / 4, k = s % 4;
  const float d = half(b.d);
  for (int h = 0; h < 2; ++h) {
    scale[h] = d * static_cast<float>(b.scales[2 * s + h]);
    offset[h] = 0.0f;
  }
  const __m256i lo = bits(load32(b.ql + 64 * n + 32 * (k % 2)), 4 * (k / 2), 0xF);
  const __m256i hi = bits(load32(b.qh + 32 * n), 2 * k, 3);
  return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
}

LS_KQ_AVX2 __m256i codes(const math::BlockIQ4_NL& b, int, float* scale, float* offset) {
  scale[0] = scale[1] = half(b.d);
  offset[0] = offset[1] = 0.0f;
  return iq4_lookup(nibbles16(b.qs));
}

LS_KQ_AVX2 __m256i codes(const math::BlockIQ4_XS& b, int s, float* scale, float* offset) {
  const int ls = ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
  scale[0] = scale[1] = half(b.d) * static_cast<float>(ls - 32);
  offset[0] = offset[1] = 0.0f;
  return iq4_lookup(nibbles16(b.qs + 16 * s));
}

LS_KQ_AVX2 __m256i codes(const math::BlockMXFP4& b, int, float* scale, float* offset) {
  scale[0] = scale[1] = math::e8m0_half_to_f32(b.e);
  offset[0] = offset[1] = 0.0f;
  return mxfp4_lookup(nibbles16(b.qs));
}

}  // namespace layerstream::kernels::cpu::kquant_simd

#endif

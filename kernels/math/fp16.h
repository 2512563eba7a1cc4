// IEEE binary16 and bfloat16 <-> float32 conversions, bit-exact, for both
// host and device code. Rounding is round-to-nearest-even, as hardware does.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "kernels/math/host_device.h"

namespace layerstream::math {

// The bits of a float and back: the CUDA intrinsics on the device, the
// standard bit cast on the host.
#if defined(__CUDA_ARCH__)
LS_HD uint32_t f32_bits(float f) { return __float_as_uint(f); }
LS_HD float f32_from_bits(uint32_t u) { return __uint_as_float(u); }
#else
LS_HD uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }
LS_HD float f32_from_bits(uint32_t u) { return std::bit_cast<float>(u); }
#endif

// binary16 bits -> float (exact: every half is a float).
LS_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);  // +-0
    // subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float -> binary16 bits, round to nearest even; overflow to inf; nan stays nan.
LS_HD uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520 -> inf
  if (abs < 0x38800000u) {
    // result is subnormal (or zero): value / 2^-24, rounded to nearest even
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // so that result = m >> shift (with rounding)
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15 (shifted by 13)
  const uint32_t rem = r & 0x1FFFu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

LS_HD float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

// float -> bfloat16 bits, round to nearest even; nan stays a quiet nan.
LS_HD uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace layerstream::math

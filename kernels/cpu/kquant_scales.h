// Unpacking the packed per-sub-block scales of a K-quant super-block for the
// fast kernels, all eight at once (the scalar k4_scale_min of
// kernels/math/kquant_blocks.h per sub-block costs as much as the sub-block's
// dot product in a decode).
#pragma once

#include <cstdint>
#include <cstring>

namespace layerstream::kernels::cpu {

// Q4_K / Q5_K: the 12 packed bytes -> out[0..8) the 6-bit scales of
// sub-blocks 0-7, out[8..16) their 6-bit mins (as k4_scale_min gives them).
// Scales 0-3 and mins 0-3 are the low 6 bits of bytes 0-3 and 4-7; scales
// 4-7 take their low nibble from bytes 8-11 and their top 2 bits from the
// top of bytes 0-3; mins 4-7 the high nibble of bytes 8-11 and the top of
// bytes 4-7. Done on 32-bit words, four sub-blocks per operation.
inline void k4_unpack_scales(const uint8_t* packed, uint8_t out[16]) {
  uint32_t w[3];
  std::memcpy(w, packed, 12);
  constexpr uint32_t kLow6 = 0x3F3F3F3F, kLow4 = 0x0F0F0F0F, kLow2 = 0x03030303;
  const uint32_t sc_lo = w[0] & kLow6;
  const uint32_t sc_hi = (w[2] & kLow4) | (((w[0] >> 6) & kLow2) << 4);
  const uint32_t m_lo = w[1] & kLow6;
  const uint32_t m_hi = ((w[2] >> 4) & kLow4) | (((w[1] >> 6) & kLow2) << 4);
  const uint32_t o[4] = {sc_lo, sc_hi, m_lo, m_hi};
  std::memcpy(out, o, 16);
}

}  // namespace layerstream::kernels::cpu

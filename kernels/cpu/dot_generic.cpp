// Portable row kernels: decode with the shared math, accumulate in 8 lanes
// (GCC vectorises the lane loop) so results do not depend on one long chain.
#include <cstring>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/kquant_dot.h"
#include "kernels/math/fp16.h"
#include "kernels/math/quant_blocks.h"

namespace layerstream::kernels::cpu::generic {
namespace {

using math::kQK;

template <typename Block>
void decode_blocks(const void* row, int64_t first, int64_t n, float* out) {
  const auto* blocks = static_cast<const Block*>(row) + first / kQK;
  for (int64_t b = 0; b < n / kQK; ++b) {
    Block blk;
    std::memcpy(&blk, blocks + b, sizeof(Block));
    math::dequantize_block(blk, out + b * kQK);
  }
}

void decode_f32(const void* row, int64_t first, int64_t n, float* out) {
  std::memcpy(out, static_cast<const float*>(row) + first, n * sizeof(float));
}
void decode_f16(const void* row, int64_t first, int64_t n, float* out) {
  const auto* h = static_cast<const uint16_t*>(row) + first;
  for (int64_t i = 0; i < n; ++i) out[i] = math::f16_to_f32(h[i]);
}
void decode_bf16(const void* row, int64_t first, int64_t n, float* out) {
  const auto* h = static_cast<const uint16_t*>(row) + first;
  for (int64_t i = 0; i < n; ++i) out[i] = math::bf16_to_f32(h[i]);
}

// Decode a span into a stack buffer, then the dense dot.
template <DecodeFn Decode>
float dot_via_decode(const void* row, const float* x, int64_t n) {
  constexpr int64_t kSpan = 256;  // multiple of the block size
  float buf[kSpan];
  float sum = 0;
  for (int64_t i = 0; i < n; i += kSpan) {
    const int64_t len = n - i < kSpan ? n - i : kSpan;
    Decode(row, i, len, buf);
    sum += dot_f32(buf, x + i, len);
  }
  return sum;
}

float dot_f32_row(const void* row, const float* x, int64_t n) { return dot_f32(static_cast<const float*>(row), x, n); }

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += a[i + l] * b[i + l];
  }
  float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

RowKernels row_kernels(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return {dot_f32_row, decode_f32};
    case GgmlType::F16: return {dot_via_decode<decode_f16>, decode_f16};
    case GgmlType::BF16: return {dot_via_decode<decode_bf16>, decode_bf16};
    case GgmlType::Q8_0:
      return {dot_via_decode<decode_blocks<math::BlockQ8_0>>, decode_blocks<math::BlockQ8_0>};
    case GgmlType::Q4_0:
      return {dot_via_decode<decode_blocks<math::BlockQ4_0>>, decode_blocks<math::BlockQ4_0>};
    case GgmlType::Q4_1:
      return {dot_via_decode<decode_blocks<math::BlockQ4_1>>, decode_blocks<math::BlockQ4_1>};
    default: return kquant_row_kernels(type);  // Q5, K-quants, IQ4 (kquant_generic.cpp)
  }
}

}  // namespace layerstream::kernels::cpu::generic

namespace layerstream::kernels::cpu {

namespace {
struct Dispatch {
  bool use_avx2 = avx2::supported();
  bool use_avx512 = use_avx2 && avx512::supported();
};
const Dispatch& dispatch() {
  static const Dispatch d;
  return d;
}
}  // namespace

RowKernels row_kernels(GgmlType type) {
  if (dispatch().use_avx512) return avx512::row_kernels(type);
  return dispatch().use_avx2 ? avx2::row_kernels(type) : generic::row_kernels(type);
}
float dot_f32(const float* a, const float* b, int64_t n) {
  return dispatch().use_avx2 ? avx2::dot_f32(a, b, n) : generic::dot_f32(a, b, n);
}
const char* row_kernels_isa() {
  if (dispatch().use_avx512) return "avx512";
  return dispatch().use_avx2 ? "avx2" : "generic";
}

}  // namespace layerstream::kernels::cpu

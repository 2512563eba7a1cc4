// AVX2 + FMA + F16C row kernels. Each function carries the target attribute,
// so this file builds with the project's baseline flags and is only called
// after avx2::supported() confirmed the CPU has the instructions.
#include <cstring>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/kquant_dot.h"
#include "kernels/cpu/x86_simd.h"
#include "kernels/math/quant_blocks.h"

#if LS_X86_SIMD

namespace layerstream::kernels::cpu::avx2 {
namespace {

using math::kQK;

LS_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

LS_AVX2 inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// 8 unsigned bytes (low 8 of v) -> 8 floats.
LS_AVX2 inline __m256 u8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }
LS_AVX2 inline __m256 i8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

LS_AVX2 float dot_f32_row(const void* row, const float* x, int64_t n) {
  return dot_f32(static_cast<const float*>(row), x, n);
}

LS_AVX2 float dot_f16(const void* row, const float* x, int64_t n) {
  const auto* w = static_cast<const uint16_t*>(row);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))),
                         _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8))),
                         _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 16))),
                         _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 24))),
                         _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) {
    a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))),
                         _mm256_loadu_ps(x + i), a0);
  }
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) sum += half_to_float(w[i]) * x[i];
  return sum;
}

LS_AVX2 inline __m256 bf16x8(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

LS_AVX2 float dot_bf16(const void* row, const float* x, int64_t n) {
  const auto* w = static_cast<const uint16_t*>(row);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(bf16x8(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(bf16x8(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(bf16x8(w + i), _mm256_loadu_ps(x + i), a0);
  float sum = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) {
    uint32_t u = static_cast<uint32_t>(w[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    sum += f * x[i];
  }
  return sum;
}

LS_AVX2 float dot_q8_0(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const math::BlockQ8_0*>(row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < n / kQK; ++k, x += kQK) {
    const int8_t* q = b[k].qs;
    __m256 s0 = _mm256_mul_ps(i8_to_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))), _mm256_loadu_ps(x));
    __m256 s1 = _mm256_mul_ps(i8_to_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8))), _mm256_loadu_ps(x + 8));
    s0 = _mm256_fmadd_ps(i8_to_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 16))), _mm256_loadu_ps(x + 16), s0);
    s1 = _mm256_fmadd_ps(i8_to_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 24))), _mm256_loadu_ps(x + 24), s1);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[k].d)), _mm256_add_ps(s0, s1), acc);
  }
  return hsum(acc);
}

// Sum over one Q4 block of nibble * x: low nibbles pair with x[0..15], high with x[16..31].
LS_AVX2 inline __m256 q4_block_sum(const uint8_t* qs, const float* x, __m256 offset) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(raw, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
  __m256 s0 = _mm256_mul_ps(_mm256_add_ps(u8_to_ps(lo), offset), _mm256_loadu_ps(x));
  __m256 s1 = _mm256_mul_ps(_mm256_add_ps(u8_to_ps(_mm_srli_si128(lo, 8)), offset), _mm256_loadu_ps(x + 8));
  s0 = _mm256_fmadd_ps(_mm256_add_ps(u8_to_ps(hi), offset), _mm256_loadu_ps(x + 16), s0);
  s1 = _mm256_fmadd_ps(_mm256_add_ps(u8_to_ps(_mm_srli_si128(hi, 8)), offset), _mm256_loadu_ps(x + 24), s1);
  return _mm256_add_ps(s0, s1);
}

LS_AVX2 float dot_q4_0(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const math::BlockQ4_0*>(row);
  const __m256 minus8 = _mm256_set1_ps(-8.0f);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < n / kQK; ++k, x += kQK) {
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[k].d)), q4_block_sum(b[k].qs, x, minus8), acc);
  }
  return hsum(acc);
}

// sum (d*q + m) * x = d * sum(q*x) + m * sum(x)
LS_AVX2 float dot_q4_1(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const math::BlockQ4_1*>(row);
  const __m256 zero = _mm256_setzero_ps();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < n / kQK; ++k, x += kQK) {
    const __m256 xs = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)),
                                    _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[k].d)), q4_block_sum(b[k].qs, x, zero), acc);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[k].m)), xs, acc);
  }
  return hsum(acc);
}

// ---- decoders ---------------------------------------------------------------
void decode_f32(const void* row, int64_t first, int64_t n, float* out) {
  std::memcpy(out, static_cast<const float*>(row) + first, n * sizeof(float));
}

LS_AVX2 void decode_f16(const void* row, int64_t first, int64_t n, float* out) {
  const auto* w = static_cast<const uint16_t*>(row) + first;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))));
  }
  for (; i < n; ++i) out[i] = half_to_float(w[i]);
}

LS_AVX2 void decode_bf16(const void* row, int64_t first, int64_t n, float* out) {
  const auto* w = static_cast<const uint16_t*>(row) + first;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, bf16x8(w + i));
  for (; i < n; ++i) {
    uint32_t u = static_cast<uint32_t>(w[i]) << 16;
    std::memcpy(out + i, &u, 4);
  }
}

template <typename Block>
LS_AVX2 void decode_blocks(const void* row, int64_t first, int64_t n, float* out) {
  const auto* blocks = static_cast<const Block*>(row) + first / kQK;
  for (int64_t b = 0; b < n / kQK; ++b) math::dequantize_block(blocks[b], out + b * kQK);
}

}  // namespace

bool supported() {
  __builtin_cpu_init();
  // F16C through cpuid (leaf 1, ECX bit 29): clang before 16 rejects
  // __builtin_cpu_supports("f16c").
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
}

LS_AVX2 float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), a0);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

RowKernels row_kernels(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return {dot_f32_row, decode_f32};
    case GgmlType::F16: return {dot_f16, decode_f16};
    case GgmlType::BF16: return {dot_bf16, decode_bf16};
    case GgmlType::Q8_0: return {dot_q8_0, decode_blocks<math::BlockQ8_0>};
    case GgmlType::Q4_0: return {dot_q4_0, decode_blocks<math::BlockQ4_0>};
    case GgmlType::Q4_1: return {dot_q4_1, decode_blocks<math::BlockQ4_1>};
    default: return kquant_row_kernels(type);  // Q5, K-quants, IQ4 (kquant_avx2.cpp)
  }
}

}  // namespace layerstream::kernels::cpu::avx2

#endif  // LS_X86_SIMD

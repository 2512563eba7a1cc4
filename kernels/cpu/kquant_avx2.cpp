// AVX2 + FMA row kernels for the kquant_blocks.h types (see kquant_dot.h).
// Only called after avx2::supported().
#include <cstring>

#include "kernels/cpu/kquant_dot.h"
#include "kernels/cpu/kquant_simd.h"
#include "kernels/cpu/x86_simd.h"
#include "kernels/math/kquant_types.h"

#if LS_X86_SIMD

namespace layerstream::kernels::cpu::avx2 {
namespace {

LS_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sub-block s of b decoded exactly into w[0..3] (8 elements each): codes
// unpacked in vector registers (kquant_simd.h), scale * code + offset.
template <typename Block>
LS_AVX2 inline void sub_weights(const Block& b, int s, __m256* w) {
  float scale[2], offset[2];
  const __m256i q = kquant_simd::codes(b, s, scale, offset);
  for (int h = 0; h < 2; ++h) {
    const __m128i qh = h == 0 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
    const __m256 sc = _mm256_set1_ps(scale[h]), of = _mm256_set1_ps(offset[h]);
    w[2 * h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(qh)), sc, of);
    w[2 * h + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(qh, 8))), sc, of);
  }
}

template <typename Block>
LS_AVX2 float dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const Block*>(row);
  // Four accumulators: consecutive FMAs into one register are a sub-block apart.
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  for (int64_t k = 0; k < n / Block::kElems; ++k) {
    for (int s = 0; s < Block::kElems / 32; ++s, x += 32) {
      __m256 w[4];
      sub_weights(b[k], s, w);
      a0 = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(x), a0);
      a1 = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(x + 8), a1);
      a2 = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(x + 16), a2);
      a3 = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(x + 24), a3);
    }
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

template <typename Block>
LS_AVX2 void decode(const void* row, int64_t first, int64_t n, float* out) {
  const auto* b = static_cast<const Block*>(row) + first / Block::kElems;
  for (int64_t k = 0; k < n / Block::kElems; ++k) {
    for (int s = 0; s < Block::kElems / 32; ++s, out += 32) {
      __m256 w[4];
      sub_weights(b[k], s, w);
      for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + 8 * i, w[i]);
    }
  }
}

}  // namespace

RowKernels kquant_row_kernels(GgmlType type) {
  return kquant_row_kernels_from(type, []<class B>(math::BlockTag<B>) { return RowKernels{dot<B>, decode<B>}; });
}

}  // namespace layerstream::kernels::cpu::avx2

#endif  // LS_X86_SIMD

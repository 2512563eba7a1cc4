// AVX2 + FMA row kernels for the kquant_blocks.h types (see kquant_dot.h).
// Only called after avx2::supported().
#include <cstring>

#include "kernels/cpu/kquant_dot.h"
#include "kernels/math/kquant_types.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define LS_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace layerstream::kernels::cpu::avx2 {
namespace {

LS_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sub-block s of b decoded exactly into w[0..3] (8 elements each).
template <typename Block>
LS_AVX2 inline void sub_weights(const Block& b, int s, __m256* w) {
  alignas(16) int8_t q[32];
  float scale[2], offset[2];
  math::unpack_sub(b, s, q, scale, offset);
  for (int h = 0; h < 2; ++h) {
    const __m128i qh = _mm_load_si128(reinterpret_cast<const __m128i*>(q + 16 * h));
    const __m256 sc = _mm256_set1_ps(scale[h]), of = _mm256_set1_ps(offset[h]);
    w[2 * h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(qh)), sc, of);
    w[2 * h + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(qh, 8))), sc, of);
  }
}

template <typename Block>
LS_AVX2 float dot(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const Block*>(row);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  for (int64_t k = 0; k < n / Block::kElems; ++k) {
    for (int s = 0; s < Block::kElems / 32; ++s, x += 32) {
      __m256 w[4];
      sub_weights(b[k], s, w);
      a0 = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(x), a0);
      a1 = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(x + 8), a1);
      a0 = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(x + 16), a0);
      a1 = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(x + 24), a1);
    }
  }
  return hsum(_mm256_add_ps(a0, a1));
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
  RowKernels k{nullptr, nullptr};
  math::visit_kquant_type(type, [&](auto tag) {
    using Block = typename decltype(tag)::type;
    k = {dot<Block>, decode<Block>};
  });
  return k;
}

}  // namespace layerstream::kernels::cpu::avx2

#else

namespace layerstream::kernels::cpu::avx2 {
RowKernels kquant_row_kernels(GgmlType type) { return generic::kquant_row_kernels(type); }
}  // namespace layerstream::kernels::cpu::avx2

#endif

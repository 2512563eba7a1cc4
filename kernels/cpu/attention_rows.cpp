#include "kernels/cpu/attention_rows.h"

#include "kernels/cpu/dot.h"

#if defined(__x86_64__) && defined(__GNUC__)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define LS_AVX512F __attribute__((target("avx512f,avx2,fma")))
#endif

namespace layerstream::kernels::cpu {
namespace {

void scores_generic(const float* k, int64_t stride, int64_t n_pos, const float* q, int64_t group, int64_t hd,
                    float scale, float* s) {
  for (int64_t i = 0; i < n_pos; ++i)
    for (int64_t g = 0; g < group; ++g) s[g * n_pos + i] = scale * dot_f32(k + i * stride, q + g * hd, hd);
}

void weighted_sum_generic(const float* v, int64_t stride, int64_t n_pos, const float* p, int64_t group, int64_t hd,
                          float* out) {
  for (int64_t i = 0; i < n_pos; ++i) {
    for (int64_t g = 0; g < group; ++g) {
      const float w = p[g * n_pos + i];
      for (int64_t d = 0; d < hd; ++d) out[g * hd + d] += w * v[i * stride + d];
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
LS_AVX512F inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

LS_AVX512F void scores_avx512(const float* k, int64_t stride, int64_t n_pos, const float* q, int64_t group,
                              int64_t hd, float scale, float* s) {
  for (int64_t i = 0; i < n_pos; ++i) {
    const float* krow = k + i * stride;
    for (int64_t g = 0; g < group; ++g) {
      const float* qg = q + g * hd;
      __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
      int64_t d = 0;
      for (; d + 32 <= hd; d += 32) {
        a = _mm512_fmadd_ps(_mm512_loadu_ps(krow + d), _mm512_loadu_ps(qg + d), a);
        b = _mm512_fmadd_ps(_mm512_loadu_ps(krow + d + 16), _mm512_loadu_ps(qg + d + 16), b);
      }
      for (; d < hd; d += 16) {
        const __mmask16 m = tail_mask(hd - d);
        a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, krow + d), _mm512_maskz_loadu_ps(m, qg + d), a);
      }
      s[g * n_pos + i] = scale * _mm512_reduce_add_ps(_mm512_add_ps(a, b));
    }
  }
}

// One query head at a time with its output row in registers (head_dim up to
// 256: 16 vectors); the V rows of an item stay in L2 across the group.
LS_AVX512F void weighted_sum_avx512(const float* v, int64_t stride, int64_t n_pos, const float* p, int64_t group,
                                    int64_t hd, float* out) {
  constexpr int kMax = 16;
  const int nv = static_cast<int>((hd + 15) / 16);
  if (nv > kMax) {
    weighted_sum_generic(v, stride, n_pos, p, group, hd, out);
    return;
  }
  for (int64_t g = 0; g < group; ++g) {
    __m512 acc[kMax];
    for (int j = 0; j < nv; ++j) acc[j] = _mm512_maskz_loadu_ps(tail_mask(hd - 16 * j), out + g * hd + 16 * j);
    const float* pg = p + g * n_pos;
    for (int64_t i = 0; i < n_pos; ++i) {
      const __m512 w = _mm512_set1_ps(pg[i]);
      const float* vrow = v + i * stride;
      for (int j = 0; j < nv; ++j)
        acc[j] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(tail_mask(hd - 16 * j), vrow + 16 * j), acc[j]);
    }
    for (int j = 0; j < nv; ++j) _mm512_mask_storeu_ps(out + g * hd + 16 * j, tail_mask(hd - 16 * j), acc[j]);
  }
}
#endif

bool use_avx512() {
  static const bool yes = avx512::supported();  // once: CPUID is slow in a VM
  return yes;
}

}  // namespace

void attention_scores(const float* k, int64_t stride, int64_t n_pos, const float* q, int64_t group, int64_t hd,
                      float scale, float* s) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (use_avx512()) return scores_avx512(k, stride, n_pos, q, group, hd, scale, s);
#endif
  scores_generic(k, stride, n_pos, q, group, hd, scale, s);
}

void attention_weighted_sum(const float* v, int64_t stride, int64_t n_pos, const float* p, int64_t group, int64_t hd,
                            float* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (use_avx512()) return weighted_sum_avx512(v, stride, n_pos, p, group, hd, out);
#endif
  weighted_sum_generic(v, stride, n_pos, p, group, hd, out);
}

}  // namespace layerstream::kernels::cpu

#include "kernels/cpu/attention_rows.h"

#include <algorithm>
#include <type_traits>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/x86_simd.h"
#include "kernels/math/fp16.h"

namespace layerstream::kernels::cpu {
namespace {

inline float to_f32(float x) { return x; }
inline float to_f32(uint16_t h) { return math::f16_to_f32(h); }

template <typename E>
void scores_generic(const E* k, int64_t stride, int64_t n_pos, const float* q, int64_t group, int64_t hd, float scale,
                    float* s) {
  for (int64_t i = 0; i < n_pos; ++i) {
    for (int64_t g = 0; g < group; ++g) {
      if constexpr (std::is_same_v<E, float>) {
        s[g * n_pos + i] = scale * dot_f32(k + i * stride, q + g * hd, hd);
      } else {
        float sum = 0;
        for (int64_t d = 0; d < hd; ++d) sum += to_f32(k[i * stride + d]) * q[g * hd + d];
        s[g * n_pos + i] = scale * sum;
      }
    }
  }
}

template <typename E>
void weighted_sum_generic(const E* v, int64_t stride, int64_t n_pos, const float* p, int64_t group, int64_t hd,
                          float* out) {
  for (int64_t i = 0; i < n_pos; ++i) {
    for (int64_t g = 0; g < group; ++g) {
      const float w = p[g * n_pos + i];
      for (int64_t d = 0; d < hd; ++d) out[g * hd + d] += w * to_f32(v[i * stride + d]);
    }
  }
}

#if LS_X86_SIMD
// Cache rows are a few hundred bytes, kv_row apart (2 KiB and more): the
// hardware prefetchers lose them at page boundaries, so each loop asks for
// the row this many positions ahead (12 left the 2048-position decode of the
// 768 MiB example model reading its KV cache at ~20 GB/s; 32 and 64 measured
// alike, about 0.5 ms a token faster: bench/decode-context.sh).
constexpr int64_t kPrefetchRows = 32;
template <typename E>
LS_AVX512F inline void prefetch_row(const E* row, int64_t n) {
  const auto* b = reinterpret_cast<const char*>(row);
  for (int64_t off = 0; off < n * static_cast<int64_t>(sizeof(E)); off += 64) _mm_prefetch(b + off, _MM_HINT_T0);
}

// 16 cache elements from p as floats; masked: lanes outside m are 0 (and
// not read: the f16 tail goes through a zeroed copy, as the masked 16-bit
// load would need AVX-512 VL).
LS_AVX512F inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
LS_AVX512F inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
LS_AVX512F inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
LS_AVX512F inline __m512 load16(const uint16_t* p, __mmask16 m) {
  if (m == 0xFFFF) return load16(p);
  alignas(32) uint16_t tmp[16] = {};
  for (int j = 0; j < 16; ++j)
    if (m & (1u << j)) tmp[j] = p[j];
  return load16(tmp);
}

// 8 vectors -> their 8 horizontal sums, in order (halves added, then a
// hadd tree), far cheaper than 8 separate reductions.
LS_AVX512F inline __m256 reduce8(const __m512* a) {
  __m256 y[8];
  for (int k = 0; k < 8; ++k)
    y[k] = _mm256_add_ps(_mm512_castps512_ps256(a[k]),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[k]), 1)));
  const __m256 q0 = _mm256_hadd_ps(_mm256_hadd_ps(y[0], y[1]), _mm256_hadd_ps(y[2], y[3]));
  const __m256 q1 = _mm256_hadd_ps(_mm256_hadd_ps(y[4], y[5]), _mm256_hadd_ps(y[6], y[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

// s[idx[j]] = scale * hsum(acc[j]) for j < n (n <= 8; acc[n..8) are overwritten).
LS_AVX512F inline void store_sums8(__m512* acc, const int64_t* idx, int n, float scale, float* s) {
  for (int j = n; j < 8; ++j) acc[j] = _mm512_setzero_ps();
  alignas(32) float sums[8];
  _mm256_store_ps(sums, _mm256_mul_ps(reduce8(acc), _mm256_set1_ps(scale)));
  for (int j = 0; j < n; ++j) s[idx[j]] = sums[j];
}

// The (position, head) pairs in order f = i * group + g, eight dot products
// at a time, reduced together; the K row of a position is read from memory
// once and from L1 for the other heads of its group.
template <typename E>
LS_AVX512F void scores_avx512(const E* k, int64_t stride, int64_t n_pos, const float* q, int64_t group, int64_t hd,
                              float scale, float* s) {
  const int64_t total = n_pos * group;
  __m512 acc[8];
  int64_t idx[8];
  int n = 0;
  for (int64_t f = 0; f < total; ++f) {
    const int64_t i = f / group, g = f % group;
    const E* krow = k + i * stride;
    const float* qg = q + g * hd;
    if (g == 0 && i + kPrefetchRows < n_pos) prefetch_row(krow + kPrefetchRows * stride, hd);
    __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
      a = _mm512_fmadd_ps(load16(krow + d), _mm512_loadu_ps(qg + d), a);
      b = _mm512_fmadd_ps(load16(krow + d + 16), _mm512_loadu_ps(qg + d + 16), b);
    }
    for (; d < hd; d += 16) {
      const __mmask16 m = tail_mask(hd - d);
      a = _mm512_fmadd_ps(load16(krow + d, m), _mm512_maskz_loadu_ps(m, qg + d), a);
    }
    acc[n] = _mm512_add_ps(a, b);
    idx[n++] = g * n_pos + i;
    if (n == 8) {
      store_sums8(acc, idx, n, scale, s);
      n = 0;
    }
  }
  if (n) store_sums8(acc, idx, n, scale, s);
}

// G query heads x V vectors (16 floats) of their output rows in registers;
// each V row vector is loaded once for the G heads.
template <typename E, int G, int V>
LS_AVX512F void weighted_sum_tile(const E* v, int64_t stride, int64_t n_pos, const float* p, int64_t hd,
                                  float* out, int64_t j0) {
  __m512 acc[G][V];
  __mmask16 m[V];
  for (int j = 0; j < V; ++j) m[j] = tail_mask(hd - 16 * (j0 + j));
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < V; ++j) acc[g][j] = _mm512_maskz_loadu_ps(m[j], out + g * hd + 16 * (j0 + j));
  for (int64_t i = 0; i < n_pos; ++i) {
    const E* vrow = v + i * stride + 16 * j0;
    if (i + kPrefetchRows < n_pos)
      prefetch_row(vrow + kPrefetchRows * stride, std::min<int64_t>(16 * V, hd - 16 * j0));
    __m512 vv[V];
    for (int j = 0; j < V; ++j) vv[j] = load16(vrow + 16 * j, m[j]);
    for (int g = 0; g < G; ++g) {
      const __m512 w = _mm512_set1_ps(p[g * n_pos + i]);
      for (int j = 0; j < V; ++j) acc[g][j] = _mm512_fmadd_ps(w, vv[j], acc[g][j]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < V; ++j) _mm512_mask_storeu_ps(out + g * hd + 16 * (j0 + j), m[j], acc[g][j]);
}

template <typename E, int G>
LS_AVX512F void weighted_sum_heads(const E* v, int64_t stride, int64_t n_pos, const float* p, int64_t hd,
                                   float* out) {
  const int64_t nv = (hd + 15) / 16;
  int64_t j = 0;
  for (; j + 4 <= nv; j += 4) weighted_sum_tile<E, G, 4>(v, stride, n_pos, p, hd, out, j);
  switch (nv - j) {
    case 3: weighted_sum_tile<E, G, 3>(v, stride, n_pos, p, hd, out, j); break;
    case 2: weighted_sum_tile<E, G, 2>(v, stride, n_pos, p, hd, out, j); break;
    case 1: weighted_sum_tile<E, G, 1>(v, stride, n_pos, p, hd, out, j); break;
    default: break;
  }
}

// Query heads four at a time (16 accumulators), 64 output floats per pass
// over the positions.
template <typename E>
LS_AVX512F void weighted_sum_avx512(const E* v, int64_t stride, int64_t n_pos, const float* p, int64_t group,
                                    int64_t hd, float* out) {
  int64_t g = 0;
  for (; g + 4 <= group; g += 4) weighted_sum_heads<E, 4>(v, stride, n_pos, p + g * n_pos, hd, out + g * hd);
  switch (group - g) {
    case 3: weighted_sum_heads<E, 3>(v, stride, n_pos, p + g * n_pos, hd, out + g * hd); break;
    case 2: weighted_sum_heads<E, 2>(v, stride, n_pos, p + g * n_pos, hd, out + g * hd); break;
    case 1: weighted_sum_heads<E, 1>(v, stride, n_pos, p + g * n_pos, hd, out + g * hd); break;
    default: break;
  }
}
#endif

bool use_avx512() {
  static const bool yes = avx512::supported();  // once: CPUID is slow in a VM
  return yes;
}

}  // namespace

namespace {
template <typename E>
void scores_any(const E* k, int64_t stride, int64_t n_pos, const float* q, int64_t group, int64_t hd, float scale,
                float* s) {
#if LS_X86_SIMD
  if (use_avx512()) return scores_avx512(k, stride, n_pos, q, group, hd, scale, s);
#endif
  scores_generic(k, stride, n_pos, q, group, hd, scale, s);
}
template <typename E>
void weighted_sum_any(const E* v, int64_t stride, int64_t n_pos, const float* p, int64_t group, int64_t hd,
                      float* out) {
#if LS_X86_SIMD
  if (use_avx512()) return weighted_sum_avx512(v, stride, n_pos, p, group, hd, out);
#endif
  weighted_sum_generic(v, stride, n_pos, p, group, hd, out);
}
}  // namespace

void attention_scores(const float* k, int64_t stride, int64_t n_pos, const float* q, int64_t group, int64_t hd,
                      float scale, float* s) {
  scores_any(k, stride, n_pos, q, group, hd, scale, s);
}
void attention_scores(const uint16_t* k, int64_t stride, int64_t n_pos, const float* q, int64_t group, int64_t hd,
                      float scale, float* s) {
  scores_any(k, stride, n_pos, q, group, hd, scale, s);
}
void attention_weighted_sum(const float* v, int64_t stride, int64_t n_pos, const float* p, int64_t group, int64_t hd,
                            float* out) {
  weighted_sum_any(v, stride, n_pos, p, group, hd, out);
}
void attention_weighted_sum(const uint16_t* v, int64_t stride, int64_t n_pos, const float* p, int64_t group,
                            int64_t hd, float* out) {
  weighted_sum_any(v, stride, n_pos, p, group, hd, out);
}

}  // namespace layerstream::kernels::cpu

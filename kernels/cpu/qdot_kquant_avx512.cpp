// AVX-512 VNNI fast-path kernels for the 256-element K-quants (Q4_K, Q5_K,
// Q6_K; layouts in kernels/math/kquant_blocks.h). A super-block is 8
// sub-blocks of 32 and is taken as 4 pairs of sub-blocks, one 512-bit vector
// of codes each (lanes 0-7: the first sub-block, 8-15: the second), against
// the pair's two quantised activation blocks, as in qdot_avx512.cpp.
//
//   Q4_K / Q5_K: codes 0..15 / 0..31 (unsigned operand of vpdpbusd), per
//     sub-block scale d * sc and offset -dmin * m: the offset term
//     -dmin m d_a sum(a) is one more FMA per pair (d_a sum(a) / 8 per lane).
//   Q6_K: codes 0..63 with the -32 folded into the accumulator's start
//     (-32 * the lane's 4 activations), scales per 16 elements (4 lanes).
// The per-block scales are unpacked once per row and super-block.
#include <cstring>

#include "kernels/cpu/kquant_scales.h"
#include "kernels/cpu/qdot.h"
#include "kernels/cpu/x86_simd.h"
#include "kernels/math/kquant_blocks.h"

#if LS_X86_SIMD

namespace layerstream::kernels::cpu::avx512 {
namespace {

constexpr int kSubs = math::kQK_K / kQBlock;  // 8 sub-blocks per super-block
constexpr int kPairs = kSubs / 2;

LS_VNNI512 inline __m512 bcast2(float a, float b) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)), _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}
LS_VNNI512 inline __m512i load2(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(b)), 1);
}
LS_VNNI512 inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Activations of sub-blocks (2j, 2j + 1) of a super-block (a: its 8 QBlocks).
struct ActMin {
  __m512i q;
  __m512 d, s;  // s: d * sum(q) / 8 per lane
};
LS_VNNI512 inline ActMin act_min(const QBlock* a, int j) {
  const QBlock &a0 = a[2 * j], &a1 = a[2 * j + 1];
  return {load2(a0.qs, a1.qs), bcast2(a0.d, a1.d),
          bcast2(a0.d * static_cast<float>(a0.sum) * 0.125f, a1.d * static_cast<float>(a1.sum) * 0.125f)};
}

struct K4Prep {
  float d[kSubs], m[kSubs];  // d * sc, -dmin * m per sub-block
};
// All eight scales and mins at once (kquant_scales.h), scaled in one vector op each.
LS_VNNI512 inline K4Prep k4_prep(const uint8_t* scales, uint16_t d16, uint16_t dmin16) {
  alignas(16) uint8_t u[16];
  k4_unpack_scales(scales, u);
  const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u))));
  const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + 8))));
  K4Prep p;
  _mm256_storeu_ps(p.d, _mm256_mul_ps(f, _mm256_set1_ps(math::f16_to_f32(d16))));
  _mm256_storeu_ps(p.m, _mm256_mul_ps(m, _mm256_set1_ps(-math::f16_to_f32(dmin16))));
  return p;
}

struct Q4K {
  using Block = math::BlockQ4_K;
  using A = ActMin;
  using Prep = K4Prep;
  struct W {
    __m512i q;
    __m512 d, m;
  };
  LS_VNNI512 static Prep prep(const Block& b) { return k4_prep(b.scales, b.d, b.dmin); }
  LS_VNNI512 static __m512i codes(const Block& b, int j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * j));
    const __m256i mask = _mm256_set1_epi8(0x0F);
    return join(_mm256_and_si256(v, mask), _mm256_and_si256(_mm256_srli_epi16(v, 4), mask));
  }
  LS_VNNI512 static W load(const Prep& p, const Block& b, int j) {
    return {codes(b, j), bcast2(p.d[2 * j], p.d[2 * j + 1]), bcast2(p.m[2 * j], p.m[2 * j + 1])};
  }
  LS_VNNI512 static A act(const QBlock* a, int j) { return act_min(a, j); }
  LS_VNNI512 static __m512 madd(const W& w, const A& a, __m512 acc) {
    const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, a.q);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(w.d, a.d), acc);
    return _mm512_fmadd_ps(w.m, a.s, acc);
  }
};

struct Q5K : Q4K {
  using Block = math::BlockQ5_K;
  LS_VNNI512 static Prep prep(const Block& b) { return k4_prep(b.scales, b.d, b.dmin); }
  // Q4_K's nibbles plus bit s of qh[l] as bit 4 of sub-block s's code l.
  LS_VNNI512 static W load(const Prep& p, const Block& b, int j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * j));
    const __m256i mask = _mm256_set1_epi8(0x0F);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i h0 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)), one);
    const __m256i h1 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j + 1)), one);
    const __m512i q = join(_mm256_or_si256(_mm256_and_si256(v, mask), _mm256_slli_epi16(h0, 4)),
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), mask), _mm256_slli_epi16(h1, 4)));
    return {q, bcast2(p.d[2 * j], p.d[2 * j + 1]), bcast2(p.m[2 * j], p.m[2 * j + 1])};
  }
};

struct Q6K {
  using Block = math::BlockQ6_K;
  struct A {
    __m512i q, start;  // start: -32 * the 4 activations of each lane
    __m512 d;
  };
  struct Prep {
    __m512 sc;  // d * scales[i], i = 0..15 (one per 16 elements)
  };
  struct W {
    __m512i q;
    __m512 d;
  };
  LS_VNNI512 static Prep prep(const Block& b) {
    const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))));
    return {_mm512_mul_ps(sc, _mm512_set1_ps(math::f16_to_f32(b.d)))};
  }
  // Sub-blocks s = 2j, 2j + 1 = 4n + k, k + 1 (n = j / 2, k = 2 (j % 2)):
  // low 4 bits from ql[64 n ..] (low nibbles for k = 0, high for k = 2),
  // high 2 bits (qh[32 n + l] >> 2k) & 3 and >> 2(k + 1).
  LS_VNNI512 static W load(const Prep& p, const Block& b, int j) {
    const int n = j / 2, k = 2 * (j % 2);
    __m512i lo = _mm512_loadu_si512(b.ql + 64 * n);
    if (k) lo = _mm512_srli_epi16(lo, 4);
    lo = _mm512_and_si512(lo, _mm512_set1_epi8(0x0F));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * n));
    const __m256i three = _mm256_set1_epi8(3);
    const __m256i h0 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), three);
    const __m256i h1 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k + 2)), three);
    const __m512i hi = _mm512_slli_epi16(join(h0, h1), 4);
    // Lanes 4i..4i+3 take scale 4j + i (half i % 2 of sub-block 2j + i / 2).
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(4 * j),
                                         _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    return {_mm512_or_si512(lo, hi), _mm512_permutexvar_ps(idx, p.sc)};
  }
  LS_VNNI512 static A act(const QBlock* a, int j) {
    const QBlock &a0 = a[2 * j], &a1 = a[2 * j + 1];
    const __m512i q = load2(a0.qs, a1.qs);
    const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(),
                                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(32), q));
    return {q, start, bcast2(a0.d, a1.d)};
  }
  LS_VNNI512 static __m512 madd(const W& w, const A& a, __m512 acc) {
    const __m512i dot = _mm512_dpbusd_epi32(a.start, w.q, a.q);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(w.d, a.d), acc);
  }
};

template <class K, int R, int T>
LS_VNNI512 void tile(const uint8_t* rows, uint64_t row_bytes, const QBlock* xq, int64_t n, float* y, int64_t ldy) {
  const int64_t nblk = n / math::kQK_K, nq = n / kQBlock;
  const typename K::Block* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const typename K::Block*>(rows + r * row_bytes);
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nblk; ++b) {
    typename K::Prep prep[R];
    for (int r = 0; r < R; ++r) prep[r] = K::prep(w[r][b]);
    for (int j = 0; j < kPairs; ++j) {
      typename K::W wk[R];
      for (int r = 0; r < R; ++r) wk[r] = K::load(prep[r], w[r][b], j);
      for (int t = 0; t < T; ++t) {
        const typename K::A a = K::act(xq + t * nq + b * kSubs, j);
        for (int r = 0; r < R; ++r) acc[r][t] = K::madd(wk[r], a, acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <class K>
constexpr QGemmFn gemm = tiled_gemm<4, 3, tile<K, 4, 3>, tile<K, 4, 1>, tile<K, 1, 3>, tile<K, 1, 1>>;

}  // namespace

QGemmFn kquant_gemm(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_K: return gemm<Q4K>;
    case GgmlType::Q5_K: return gemm<Q5K>;
    case GgmlType::Q6_K: return gemm<Q6K>;
    default: return nullptr;
  }
}

}  // namespace layerstream::kernels::cpu::avx512

#endif  // LS_X86_SIMD

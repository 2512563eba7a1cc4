// AVX-512 VNNI fast-path kernels: two 32-element blocks per 512-bit vector,
// vpdpbusd (u8 x s8 -> i32, four products per lane) for the block sums,
// lanes 0-7 holding the first block and 8-15 the second, so the per-block
// scales are per-lane vectors and no horizontal sum is needed until the end.
//
// Signs: vpdpbusd wants one unsigned operand.
//   Q4_0/Q4_1: the nibbles (0..15) are the unsigned operand; Q4_0's -8 is
//     folded into the accumulator's start value (-sum(q) in each lane of a
//     block: 8 lanes make -8 sum(q)).
//   Q8_0: the weights are made unsigned (w + 128, an xor with 0x80) and the
//     accumulator starts at -128 sum(x), known per activation block.
// A tile is R weight rows x T tokens: weight registers are reused across
// the T tokens and activation registers across the R rows.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/qdot.h"
#include "kernels/cpu/x86_simd.h"
#include "kernels/math/kquant_blocks.h"
#include "kernels/math/quant_blocks.h"

#if LS_X86_SIMD

namespace layerstream::kernels::cpu::avx512 {
namespace {

using math::kQK;
constexpr int64_t kPrefetch = 768;  // bytes ahead in each row when a tile reads several rows

// [a x8, b x8]
LS_VNNI512 inline __m512 bcast2(float a, float b) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)), _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}
LS_VNNI512 inline __m512 bcast2_f16(uint16_t a, uint16_t b) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(a))),
                                                 _mm_set1_epi16(static_cast<short>(b)), 1));
}
LS_VNNI512 inline __m512i load2(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(b)), 1);
}
// Two Q4 blocks' 16 nibble bytes each -> [lo(a), hi(a), lo(b), hi(b)] as u8,
// i.e. elements 0..31 of block a then of block b.
LS_VNNI512 inline __m512i nibbles2(const uint8_t* a, const uint8_t* b) {
  const __m256i raw = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  __m512i v = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(raw));
  v = _mm512_mask_srli_epi16(v, 0xFF00FF00u, v, 4);
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}
LS_VNNI512 inline float reduce(__m512 v) { return _mm512_reduce_add_ps(v); }

// The scales go through one xmm per block pair rather than a broadcast
// vector per scale (vpbroadcastw + insert + a 512-bit vcvtph2ps each, the
// larger part of a decode step's uops): the first 4 bytes of two blocks
// ([d, m] for Q4_1; d and 2 bytes that are ignored for the others) become
// [d_a, m_a, d_b, m_b] in f32 with one 128-bit vcvtph2ps, are multiplied by
// the activation side's [d_a, d_a sum_a, d_b, d_b sum_b] (act_s4), and one
// vpermps spreads lane 0 over lanes 0-7 and lane 2 over 8-15. Lanes 1 and 3
// of the junk types may be Inf/NaN; nothing reads them.
LS_VNNI512 inline __m128 head4_f16(const void* a, const void* b) {
  int32_t x, y;
  std::memcpy(&x, a, 4);
  std::memcpy(&y, b, 4);
  return _mm_cvtph_ps(_mm_unpacklo_epi32(_mm_cvtsi32_si128(x), _mm_cvtsi32_si128(y)));
}
template <bool kTwo>
LS_VNNI512 inline __m128 act_s4(const QBlock* a, int64_t k) {
  const float d0 = a[k].d, d1 = kTwo ? a[k + 1].d : 0.0f;
  const float s0 = d0 * static_cast<float>(a[k].sum), s1 = kTwo ? d1 * static_cast<float>(a[k + 1].sum) : 0.0f;
  return _mm_setr_ps(d0, s0, d1, s1);
}
// [p0 x8, p2 x8]: the product of the two blocks' scales per lane.
LS_VNNI512 inline __m512 spread_d(__m128 p) {
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2),
                               _mm512_castps128_ps512(p));
}

// The activation side of a block pair (k, k + 1); with kTwo false only block
// k is real: act_s4's upper scales are zero, so whatever the upper lanes
// compute is multiplied by 0.
template <bool kTwo>
LS_VNNI512 inline __m512 act_scale(const QBlock* a, int64_t k) {
  return bcast2(a[k].d, kTwo ? a[k + 1].d : 0.0f);
}
template <bool kTwo>
LS_VNNI512 inline __m512i act_q(const QBlock* a, int64_t k) {
  return load2(a[k].qs, a[kTwo ? k + 1 : k].qs);
}

// ---- per type: weight pair, activation pair, multiply-add -------------------
// Q8_0, Q4_0 and Q5_0 share the multiply-add: a block pair's dot starts
// from the activation side's correction (A::start), then d_w d_x scales it.
struct StartedDot {
  struct W {
    __m512i q;  // unsigned codes
    __m512 d;
  };
  struct A {
    __m512i q, start;
    __m512 d;
  };
  LS_VNNI512 static __m512 madd(const W& w, const A& a, __m512 acc) {
    const __m512i dot = _mm512_dpbusd_epi32(a.start, w.q, a.q);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(w.d, a.d), acc);
  }
};

// Q8_0: the weights are made unsigned (w + 128, an xor with 0x80) and the
// activations stay signed, so the correction -128 sum(x) is per activation
// block (its QBlock::sum), put in lane 0 of the block and shared by all rows.
struct Q8_0 : StartedDot {
  using Block = math::BlockQ8_0;
  template <bool kTwo>
  LS_VNNI512 static W load(const Block* b, int64_t k) {  // q: w + 128 as u8
    const Block& b1 = b[kTwo ? k + 1 : k];
    return {_mm512_xor_si512(load2(b[k].qs, b1.qs), _mm512_set1_epi8(static_cast<char>(0x80))), bcast2_f16(b[k].d, b1.d)};
  }
  template <bool kTwo>
  LS_VNNI512 static A act(const QBlock* a, int64_t k) {  // start: -128 sum(q) in lanes 0 and 8
    const __m512i start =
        _mm512_mask_set1_epi32(_mm512_maskz_set1_epi32(0x0001, -128 * a[k].sum), 0x0100, kTwo ? -128 * a[k + 1].sum : 0);
    return {act_q<kTwo>(a, k), start, act_scale<kTwo>(a, k)};
  }
};

struct Q4_0 : StartedDot {
  using Block = math::BlockQ4_0;
  template <bool kTwo>
  LS_VNNI512 static W load(const Block* b, int64_t k) {
    const Block& b1 = b[kTwo ? k + 1 : k];
    return {nibbles2(b[k].qs, b1.qs), bcast2_f16(b[k].d, b1.d)};
  }
  template <bool kTwo>
  LS_VNNI512 static A act(const QBlock* a, int64_t k) {  // start: -sum(q) in each lane of the block (8 lanes: -8 sum)
    const __m512i start = _mm512_mask_set1_epi32(_mm512_set1_epi32(-a[k].sum), 0xFF00, kTwo ? -a[k + 1].sum : 0);
    return {act_q<kTwo>(a, k), start, act_scale<kTwo>(a, k)};
  }
};

// Q4_1: value d q + m, so a block's dot is d_w d_x dot(q, qx) + m d_x sum(qx).
// One product [d_w d_x, m d_x sum, ...] per block pair (head4_f16 x act_s4):
// lanes 0 and 2 scale the integer dots, lanes 1 and 3 (the m terms) add up
// in a 128-bit side accumulator (madd_m) when the tile has registers for it
// (T == 1, decode), else go to lanes 0 and 8 of the main one.
struct Q4_1 {
  using Block = math::BlockQ4_1;
  static constexpr bool kSideM = true;
  struct W {
    __m512i q;
    __m128 dm;  // [d_a, m_a, d_b, m_b]
  };
  struct A {
    __m512i q;
    __m128 s;
  };
  template <bool kTwo>
  LS_VNNI512 static W load(const Block* b, int64_t k) {
    const Block& b1 = b[kTwo ? k + 1 : k];
    return {nibbles2(b[k].qs, b1.qs), head4_f16(&b[k], &b1)};
  }
  template <bool kTwo>
  LS_VNNI512 static A act(const QBlock* a, int64_t k) {
    return {act_q<kTwo>(a, k), act_s4<kTwo>(a, k)};
  }
  LS_VNNI512 static __m512 madd_m(const W& w, const A& a, __m512 acc, __m128& side) {
    const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, a.q);
    const __m128 p = _mm_mul_ps(w.dm, a.s);
    side = _mm_add_ps(side, p);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), spread_d(p), acc);
  }
  LS_VNNI512 static __m512 madd(const W& w, const A& a, __m512 acc) {
    const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, a.q);
    const __m128 p = _mm_mul_ps(w.dm, a.s);
    const __m512 m = _mm512_maskz_permutexvar_ps(
        0x0101, _mm512_setr_epi32(1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0), _mm512_castps128_ps512(p));
    return _mm512_add_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), spread_d(p), acc), m);
  }
};

// Whether K keeps a side accumulator (K::kSideM) in an R x T tile.
template <class K, int T, class = void>
struct SideM {
  static constexpr bool value = false;
};
template <class K, int T>
struct SideM<K, T, std::void_t<decltype(K::kSideM)>> {
  static constexpr bool value = K::kSideM && T == 1;
};

// Q5_0: code = nibble | 5th bit << 4 (0..31), value d * (code - 16). The
// -16 goes into the accumulator's start: -16 * (sum of the 4 activations of
// each lane), itself a vpdpbusd of 16s with the activations.
struct Q5_0 : StartedDot {
  using Block = math::BlockQ5_0;
  template <bool kTwo>
  LS_VNNI512 static W load(const Block* b, int64_t k) {
    const Block& b1 = b[kTwo ? k + 1 : k];
    uint32_t h0, h1;
    std::memcpy(&h0, b[k].qh, 4);
    std::memcpy(&h1, b1.qh, 4);
    const __m512i hi = _mm512_and_si512(_mm512_movm_epi8((uint64_t{h1} << 32) | h0), _mm512_set1_epi8(0x10));
    return {_mm512_or_si512(nibbles2(b[k].qs, b1.qs), hi), bcast2_f16(b[k].d, b1.d)};
  }
  template <bool kTwo>
  LS_VNNI512 static A act(const QBlock* a, int64_t k) {
    const __m512i q = act_q<kTwo>(a, k);
    const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(),
                                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), q));
    return {q, start, act_scale<kTwo>(a, k)};
  }
};

// One block pair of an R x T tile.
template <class K, int R, int T, bool kTwo>
LS_VNNI512 inline void step(const typename K::Block* const* w, const QBlock* const* x, int64_t k, int64_t pf,
                            __m512 (&acc)[R][T], __m128 (&side)[R]) {
  typename K::W wk[R];
  for (int r = 0; r < R; ++r) {
    if (R > 1) _mm_prefetch(reinterpret_cast<const char*>(w[r] + k) + pf, _MM_HINT_T0);
    wk[r] = K::template load<kTwo>(w[r], k);
  }
  for (int t = 0; t < T; ++t) {
    const typename K::A a = K::template act<kTwo>(x[t], k);
    for (int r = 0; r < R; ++r) {
      if constexpr (SideM<K, T>::value) {
        acc[r][t] = K::madd_m(wk[r], a, acc[r][t], side[r]);
      } else {
        acc[r][t] = K::madd(wk[r], a, acc[r][t]);
      }
    }
  }
}

template <class K, int R, int T>
LS_VNNI512 void tile(const uint8_t* rows, uint64_t row_bytes, const QBlock* xq, int64_t n, float* y, int64_t ldy) {
  const int64_t nb = n / kQK;
  const typename K::Block* w[R];
  const QBlock* x[T];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const typename K::Block*>(rows + r * row_bytes);
  for (int t = 0; t < T; ++t) x[t] = xq + t * nb;
  __m512 acc[R][T];
  __m128 side[R];  // SideM only: lanes 1 and 3 hold the m terms
  for (int r = 0; r < R; ++r) side[r] = _mm_setzero_ps();
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  // Prefetch the same place in the next tile's rows (R rows on): the tiles
  // walk the matrix in order, so that is the data needed next.
  const int64_t pf = static_cast<int64_t>(R * row_bytes);
  int64_t k = 0;
  for (; k + 2 <= nb; k += 2) step<K, R, T, true>(w, x, k, pf, acc, side);
  if (k < nb) step<K, R, T, false>(w, x, k, pf, acc, side);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float v = reduce(acc[r][t]);
      if constexpr (SideM<K, T>::value) {
        const __m128 h = _mm_movehdup_ps(side[r]);  // [s1, s1, s3, s3]
        v += _mm_cvtss_f32(_mm_add_ss(h, _mm_movehl_ps(h, h)));
      }
      y[t * ldy + r] = v;
    }
}

template <class K>
constexpr QGemmFn gemm = tiled_gemm<4, 4, tile<K, 4, 4>, tile<K, 4, 1>, tile<K, 1, 4>, tile<K, 1, 1>>;

// Decode (one token) of Q8_0 as R streams: the rows of the call are cut
// into R runs of equal length, and tile i takes row i of every run. Each run
// is contiguous in memory, so a core reads R long sequential streams (the
// whole call's share of a matrix) instead of R neighbouring rows of a few KiB
// each, and each stream is prefetched kStreamPrefetch bytes ahead of where
// it is read. On the 768 MiB Q8_0 example model this read the pass's weights
// from RAM about 15% faster per core than the neighbouring-rows tile with its
// next-tile prefetch (bench_kernels_decode_stream; issue 14 part 5 in
// bench/history/2026-12-01-worklog.md). Rows past R runs' worth
// (n_rows % R) go one at a time.
constexpr int64_t kStreamPrefetch = 1024;  // bytes ahead in each stream

template <class K, int R>
LS_VNNI512 void gemv_streams(const uint8_t* base, uint64_t row_bytes, int64_t n_rows, const QBlock* xq, int64_t n,
                             float* y) {
  const int64_t nb = n / kQK, per = n_rows / R;
  const QBlock* x[1] = {xq};
  for (int64_t i = 0; i < per; ++i) {
    const typename K::Block* w[R];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const typename K::Block*>(base + (r * per + i) * row_bytes);
    __m512 acc[R][1];
    __m128 side[R];
    for (int r = 0; r < R; ++r) acc[r][0] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 2 <= nb; k += 2) step<K, R, 1, true>(w, x, k, kStreamPrefetch, acc, side);
    if (k < nb) step<K, R, 1, false>(w, x, k, kStreamPrefetch, acc, side);
    for (int r = 0; r < R; ++r) y[r * per + i] = reduce(acc[r][0]);
  }
  for (int64_t r = per * R; r < n_rows; ++r) tile<K, 1, 1>(base + r * row_bytes, row_bytes, xq, n, y + r, 1);
}

// Q8_0's QGemmFn: decode as streams, several tokens as R x T tiles.
void gemm_q8_0(const void* rows, uint64_t row_bytes, int64_t n_rows, const QBlock* xq, int64_t n_tok, int64_t n,
               float* y, int64_t ldy) {
  static_assert(!SideM<Q8_0, 1>::value, "gemv_streams keeps no side accumulator");
  if (n_tok == 1) {
    gemv_streams<Q8_0, 4>(static_cast<const uint8_t*>(rows), row_bytes, n_rows, xq, n, y);
  } else {
    gemm<Q8_0>(rows, row_bytes, n_rows, xq, n_tok, n, y, ldy);
  }
}

// Same bytes as generic's quantiser: amax / 127, multiply by its f32
// reciprocal, round to nearest-even (the default MXCSR mode).
LS_VNNI512 void quantize(const float* x, int64_t n, QBlock* out) {
  for (int64_t b = 0; b < n / kQBlock; ++b, x += kQBlock) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
    QBlock& q = out[b];
    q.d = d;
    q.sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + 16), _mm512_cvtsepi32_epi8(q1));
  }
}

}  // namespace

bool vnni_supported() {
  // Once: CPUID traps to the hypervisor in a VM (microseconds), and the
  // matmul asks on every call.
  static const bool yes = [] {
    // CPUID leaf 7: EBX bit 31 AVX512VL, ECX bit 11 AVX512_VNNI (by CPUID
    // rather than __builtin_cpu_supports, whose names older clangs reject;
    // the OS support for the AVX-512 state is in supported()).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return supported() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & (1u << 31)) != 0 &&
           (ecx & (1u << 11)) != 0;
  }();
  return yes;
}

QuantKernels quant_kernels(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return {quantize, gemm_q8_0, "avx512-vnni"};
    case GgmlType::Q4_0: return {quantize, gemm<Q4_0>, "avx512-vnni"};
    case GgmlType::Q4_1: return {quantize, gemm<Q4_1>, "avx512-vnni"};
    case GgmlType::Q5_0: return {quantize, gemm<Q5_0>, "avx512-vnni"};
    default: {
      // qdot_kquant_avx512.cpp; the types it lacks (Q5_1, Q2_K, Q3_K, IQ4, MXFP4)
      // take the 256-bit kernels (qdot_kquant_avx2.inc), named by their ISA.
      if (const QGemmFn g = kquant_gemm(type)) return {quantize, g, "avx512-vnni"};
      const QuantKernels k256 = avx2::quant_kernels(type);
      return {quantize, k256.gemm, k256.isa};
    }
  }
}

}  // namespace layerstream::kernels::cpu::avx512

#endif  // LS_X86_SIMD

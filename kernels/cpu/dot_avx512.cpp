// AVX-512 (F + BW) row kernels for the one-token matmul: several weight rows
// per pass over x, so each x vector is loaded once for kRows rows (x of a
// 14336-wide row does not fit in L1), and 16-lane decoding halves the
// instruction count per weight byte against the AVX2 kernels.
//
// Quantised blocks are decoded exactly (integer nibble / int8 -> float), the
// activations stay float32; only the f32 summation order differs from the
// single-row kernels. Each function carries the target attribute and is only
// called after avx512::supported() confirmed the CPU has the instructions.
#include <cstring>
#include <type_traits>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/kquant_dot.h"
#include "kernels/cpu/x86_simd.h"
#include "kernels/math/quant_blocks.h"

#if LS_X86_SIMD

namespace layerstream::kernels::cpu::avx512 {
namespace {

using math::kQK;
constexpr int kRows = 4;  // rows per pass over x
// Below this width x (32 KiB) stays in L1 and one row at a time reads the
// weight as one sequential stream, which the hardware prefetcher follows
// better than kRows short interleaved streams (measured: n_in = 4096 rows
// ran ~25% slower from DRAM when interleaved).
constexpr int64_t kMultiRowMinN = 8192;
// Bytes ahead of the current block that the multi-row kernels prefetch in
// each row: kRows interleaved streams defeat the hardware prefetcher
// (measured at n_in = 14336: Q8_0 8.8 -> 5.5 ms, Q4_0 5.5 -> 4.4 ms).
constexpr int64_t kPrefetch = 1024;

LS_AVX512 inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

LS_AVX512 inline __m512 i8x16_to_ps(const void* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
}

template <int R>
LS_AVX512 void rows_f16(const uint8_t* rows, uint64_t row_bytes, const float* x, int64_t n, float* y) {
  const uint16_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const uint16_t*>(rows + r * row_bytes);
  __m512 a[R], b[R];
  for (int r = 0; r < R; ++r) a[r] = b[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
    for (int r = 0; r < R; ++r) {
      if (R > 1) _mm_prefetch(reinterpret_cast<const char*>(w[r] + i) + kPrefetch, _MM_HINT_T0);
      a[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + i))), x0, a[r]);
      b[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + i + 16))), x1,
                             b[r]);
    }
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 x0 = _mm512_loadu_ps(x + i);
    for (int r = 0; r < R; ++r) {
      a[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + i))), x0, a[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(a[r], b[r]));
    for (int64_t j = i; j < n; ++j) sum += half_to_float(w[r][j]) * x[j];
    y[r] = sum;
  }
}

// Nibbles of one Q4 block as floats through `table` (16 entries: the decoded
// value of each nibble): lo pairs with x[0..15], hi with x[16..31].
LS_AVX512 inline void q4_nibbles(const uint8_t* qs, __m512 table, __m512* lo, __m512* hi) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  *lo = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_and_si128(raw, mask)), table);
  *hi = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(raw, 4), mask)), table);
}

// One weight block's terms for rows_blocks: madd(b, x0, x1, xs, acc) adds
// b . x to acc, where x0 and x1 are the block's activations (elements 0..15,
// 16..31) and xs = x0 + x1.
struct Q8_0Rows {
  using Block = math::BlockQ8_0;
  LS_AVX512 static __m512 madd(const Block& b, __m512 x0, __m512 x1, __m512, __m512 acc) {
    __m512 s = _mm512_mul_ps(i8x16_to_ps(b.qs), x0);
    s = _mm512_fmadd_ps(i8x16_to_ps(b.qs + 16), x1, s);
    return _mm512_fmadd_ps(_mm512_set1_ps(half_to_float(b.d)), s, acc);
  }
};

// Q4_0: nibble q decodes to q - 8 (exact in f32). Q4_1: to d q + m, and
// sum (d q + m) x = d sum(q x) + m sum(x), where sum(x) (xs) is shared by the rows.
template <typename B>
struct Q4Rows {
  using Block = B;
  static constexpr bool kOffset = std::is_same_v<B, math::BlockQ4_1>;
  LS_AVX512 static __m512 madd(const Block& b, __m512 x0, __m512 x1, __m512 xs, __m512 acc) {
    const __m512 table = kOffset ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
                                 : _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    __m512 lo, hi;
    q4_nibbles(b.qs, table, &lo, &hi);
    const __m512 s = _mm512_fmadd_ps(hi, x1, _mm512_mul_ps(lo, x0));
    acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_float(b.d)), s, acc);
    if constexpr (kOffset) acc = _mm512_fmadd_ps(_mm512_set1_ps(half_to_float(b.m)), xs, acc);
    return acc;
  }
};

using Q4_0Rows = Q4Rows<math::BlockQ4_0>;
using Q4_1Rows = Q4Rows<math::BlockQ4_1>;

// R rows of 32-element blocks (K: one of the *Rows above) against x.
template <class K, int R>
LS_AVX512 void rows_blocks(const uint8_t* rows, uint64_t row_bytes, const float* x, int64_t n, float* y) {
  const typename K::Block* blk[R];
  for (int r = 0; r < R; ++r) blk[r] = reinterpret_cast<const typename K::Block*>(rows + r * row_bytes);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < n / kQK; ++k, x += kQK) {
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    const __m512 xs = _mm512_add_ps(x0, x1);  // unused (and dropped) but for Q4_1
    for (int r = 0; r < R; ++r) {
      const typename K::Block& b = blk[r][k];
      if (R > 1) _mm_prefetch(reinterpret_cast<const char*>(&b) + kPrefetch, _MM_HINT_T0);
      acc[r] = K::madd(b, x0, x1, xs, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
}

using RowsFn = void (*)(const uint8_t*, uint64_t, const float*, int64_t, float*);

// Rows in groups of kRows, the remainder one at a time.
template <RowsFn Group, RowsFn Single>
void dot_rows(const void* rows, uint64_t row_bytes, int64_t n_rows, const float* x, int64_t n, float* y) {
  const auto* base = static_cast<const uint8_t*>(rows);
  int64_t r = 0;
  if (n > kMultiRowMinN) {
    for (; r + kRows <= n_rows; r += kRows) Group(base + r * row_bytes, row_bytes, x, n, y + r);
  }
  for (; r < n_rows; ++r) Single(base + r * row_bytes, row_bytes, x, n, y + r);
}

template <RowsFn Single>
float dot_one(const void* row, const float* x, int64_t n) {
  float y;
  Single(static_cast<const uint8_t*>(row), 0, x, n, &y);
  return y;
}

template <RowsFn Group, RowsFn Single>
RowKernels make(GgmlType type) {
  return {dot_one<Single>, avx2::row_kernels(type).decode, dot_rows<Group, Single>};
}

}  // namespace

bool supported() {
  __builtin_cpu_init();
  return avx2::supported() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

RowKernels row_kernels(GgmlType type) {
  switch (type) {
    case GgmlType::F16: return make<rows_f16<kRows>, rows_f16<1>>(type);
    case GgmlType::Q8_0: return make<rows_blocks<Q8_0Rows, kRows>, rows_blocks<Q8_0Rows, 1>>(type);
    case GgmlType::Q4_0: return make<rows_blocks<Q4_0Rows, kRows>, rows_blocks<Q4_0Rows, 1>>(type);
    case GgmlType::Q4_1: return make<rows_blocks<Q4_1Rows, kRows>, rows_blocks<Q4_1Rows, 1>>(type);
    case GgmlType::F32:
    case GgmlType::BF16: return avx2::row_kernels(type);  // the AVX2 kernels are memory-bound already
    default: return kquant_row_kernels(type);  // Q5, K-quants, IQ4 (kquant_avx512.cpp)
  }
}

}  // namespace layerstream::kernels::cpu::avx512

#endif  // LS_X86_SIMD

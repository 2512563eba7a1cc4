// AVX-512 (F + BW) row kernels for the kquant_blocks.h types (see
// kquant_dot.h): 16-lane decoding, and kRows rows per pass over x for wide
// rows (as dot_avx512.cpp does for the Q4/Q8 types). Only called after
// avx512::supported().
#include <cstring>

#include "kernels/cpu/kquant_dot.h"
#include "kernels/cpu/kquant_simd.h"
#include "kernels/cpu/x86_simd.h"
#include "kernels/math/kquant_types.h"

#if LS_X86_SIMD

namespace layerstream::kernels::cpu::avx512 {
namespace {

constexpr int kRows = 4;                 // rows per pass over x
constexpr int64_t kMultiRowMinN = 8192;  // below this x stays in L1: one row at a time (see dot_avx512.cpp)
constexpr int64_t kPrefetch = 1024;      // bytes ahead prefetched in each row of a group

// Sub-block s of b decoded exactly into lo (elements 0..15) and hi (16..31):
// codes unpacked in vector registers (kquant_simd.h), scale * code + offset.
template <typename Block>
LS_AVX512 inline void sub_weights(const Block& b, int s, __m512* lo, __m512* hi) {
  float scale[2], offset[2];
  const __m256i q = kquant_simd::codes(b, s, scale, offset);
  const __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
  const __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
  *lo = _mm512_fmadd_ps(q0, _mm512_set1_ps(scale[0]), _mm512_set1_ps(offset[0]));
  *hi = _mm512_fmadd_ps(q1, _mm512_set1_ps(scale[1]), _mm512_set1_ps(offset[1]));
}

// Two accumulators per row (elements 0-15 and 16-31 of each sub-block), so
// consecutive FMAs into one register are a sub-block apart.
template <typename Block, int R>
LS_AVX512 void rows(const uint8_t* base, uint64_t row_bytes, const float* x, int64_t n, float* y) {
  const Block* blk[R];
  for (int r = 0; r < R; ++r) blk[r] = reinterpret_cast<const Block*>(base + r * row_bytes);
  __m512 acc_lo[R], acc_hi[R];
  for (int r = 0; r < R; ++r) acc_lo[r] = acc_hi[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < n / Block::kElems; ++k) {
    for (int s = 0; s < Block::kElems / 32; ++s, x += 32) {
      const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
      for (int r = 0; r < R; ++r) {
        if (R > 1 && s == 0) _mm_prefetch(reinterpret_cast<const char*>(&blk[r][k]) + kPrefetch, _MM_HINT_T0);
        __m512 lo, hi;
        sub_weights(blk[r][k], s, &lo, &hi);
        acc_lo[r] = _mm512_fmadd_ps(lo, x0, acc_lo[r]);
        acc_hi[r] = _mm512_fmadd_ps(hi, x1, acc_hi[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc_lo[r], acc_hi[r]));
}

template <typename Block>
void dot_rows(const void* base, uint64_t row_bytes, int64_t n_rows, const float* x, int64_t n, float* y) {
  const auto* p = static_cast<const uint8_t*>(base);
  int64_t r = 0;
  if (n > kMultiRowMinN) {
    for (; r + kRows <= n_rows; r += kRows) rows<Block, kRows>(p + r * row_bytes, row_bytes, x, n, y + r);
  }
  for (; r < n_rows; ++r) rows<Block, 1>(p + r * row_bytes, row_bytes, x, n, y + r);
}

template <typename Block>
float dot(const void* row, const float* x, int64_t n) {
  float y;
  rows<Block, 1>(static_cast<const uint8_t*>(row), 0, x, n, &y);
  return y;
}

template <typename Block>
LS_AVX512 void decode(const void* row, int64_t first, int64_t n, float* out) {
  const auto* b = static_cast<const Block*>(row) + first / Block::kElems;
  for (int64_t k = 0; k < n / Block::kElems; ++k) {
    for (int s = 0; s < Block::kElems / 32; ++s, out += 32) {
      __m512 lo, hi;
      sub_weights(b[k], s, &lo, &hi);
      _mm512_storeu_ps(out, lo);
      _mm512_storeu_ps(out + 16, hi);
    }
  }
}

}  // namespace

RowKernels kquant_row_kernels(GgmlType type) {
  return kquant_row_kernels_from(
      type, []<class B>(math::BlockTag<B>) { return RowKernels{dot<B>, decode<B>, dot_rows<B>}; });
}

}  // namespace layerstream::kernels::cpu::avx512

#endif  // LS_X86_SIMD

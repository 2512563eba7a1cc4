// The x16 Q4_1 layout (q4_1_packed.h): packing (portable) and the AVX-512
// VNNI matvec over it.
//
// Per block of a 16-row group: 4 loads of nibbles, 8 ands to split them
// (the high nibbles stay in place, see act_scales), 8 vpdpbusd against the
// activation's 8 dwords (broadcast once per block and shared by the groups
// of a tile), one f16 -> f32 conversion each for d and m, one conversion of
// the integer sums and two FMAs: d_w d_x dot(q, qx) goes to one
// accumulator, m_w d_x sum(qx) to another, so neither FMA chain waits on
// the other. Four groups (64 rows) per tile share the
// activation broadcasts. Each block's lines are prefetched in the next
// tile's groups (the tiles walk the matrix in order): in a real pass the
// weights come from memory in short streams (one group is 16 row_bytes),
// and this took a SmolLM2 decode step from 3.7-4.0 to 3.0-3.5 ms (2
// threads; 6.7-7.3 to 5.5-5.8 ms on one). Prefetching within a group
// (1.3-5 KiB ahead) or two tiles ahead measured no better.
#include "kernels/cpu/q4_1_packed.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/x86_simd.h"
#include "kernels/math/quant_blocks.h"

namespace layerstream::kernels::cpu::q4_1x16 {
namespace {

constexpr int64_t kBlockBytes = kRows * sizeof(math::BlockQ4_1);  // 320: one block of a group

uint64_t row_bytes(int64_t n_in) { return static_cast<uint64_t>(n_in / math::kQK) * sizeof(math::BlockQ4_1); }

#if LS_X86_SIMD
// The token's [d / 16, d sum] per block (one broadcast each per block).
// d / 16: the high nibbles stay in place (q << 4 = byte & 0xF0, no shift on
// the port the dot products use), so the integer sum is 16 x the dot and
// d / 16 (exact, a power of two) gives the same product bit for bit.
inline void act_scales(const QBlock* xq, int64_t nb, float* xs) {
  for (int64_t k = 0; k < nb; ++k) {
    xs[2 * k] = xq[k].d * 0.0625f;
    xs[2 * k + 1] = xq[k].d * static_cast<float>(xq[k].sum);
  }
}

// The token's block: its 8 activation dwords, each broadcast (shared by
// every row of a tile).
LS_VNNI512 inline void act_dwords(const QBlock& x, __m512i a[8]) {
  int32_t a32[8];
  std::memcpy(a32, x.qs, 32);
  for (int j = 0; j < 8; ++j) a[j] = _mm512_set1_epi32(a32[j]);
}

// One block of 16 rows, a lane per row (v: its 32 nibble bytes in 4 vectors;
// dw, mw: its scales as floats), into the accumulators. Both kernels below
// end here, so each lane runs the same float operations and a matrix gives
// the same bits packed or not.
LS_VNNI512 inline void add_block(const __m512i v[4], __m512 dw, __m512 mw, const __m512i a[8], __m512 xd,
                                 __m512 xsum, __m512& accd, __m512& accm) {
  const __m512i lo = _mm512_set1_epi8(0x0F), hi = _mm512_set1_epi8(static_cast<char>(0xF0));
  __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
  for (int j = 0; j < 4; ++j) {
    s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(v[j], lo), a[j]);
    s1 = _mm512_dpbusd_epi32(s1, _mm512_and_si512(v[j], hi), a[4 + j]);
  }
  accd = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(s0, 4), s1)), _mm512_mul_ps(dw, xd), accd);
  accm = _mm512_fmadd_ps(mw, xsum, accm);
}

// Where tile() finds block k of group g of its rows, and what it prefetches:
// the x16 layout (PackedGroups) or GGUF rows (GgufGroups). load() gives the
// block's 32 nibble bytes in 4 vectors (v) and its scales (dw, mw) in lanes
// ordered as kLaneIsRow says.
struct PackedGroups {
  const uint8_t* p;  // the tile's first group; groups are group_bytes apart
  uint64_t group_bytes;
  static constexpr bool kLaneIsRow = true;
  PackedGroups at(int64_t g) const { return {p + g * group_bytes, group_bytes}; }
  template <int G>
  LS_VNNI512 void load(int64_t k, int g, __m512i v[4], __m512& dw, __m512& mw) const {
    const uint8_t* bg = p + k * kBlockBytes + g * group_bytes;
    // The same block of the next tile's groups (G groups on): the tiles
    // walk the matrix in order, so that is what comes after this tile.
    for (int l = 0; l < kBlockBytes / 64; ++l)
      _mm_prefetch(reinterpret_cast<const char*>(bg + G * group_bytes) + 64 * l, _MM_HINT_T0);
    for (int j = 0; j < 4; ++j) v[j] = _mm512_loadu_si512(bg + 64 + 64 * j);
    dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bg)));
    mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bg + 32)));
  }
};

// The same products straight from GGUF rows, bit for bit: the 16 rows of a
// group are transposed in registers into the x16 lanes (rows 4x + L land in
// lane 4 L + x; the result is put back in row order at the store), then
// every lane runs the exact float operations of the packed layout. So a
// matrix gives the same bits whether it has a packed copy (resident) or not
// (streamed, split, RAM tier), which the runner's placements rely on.
// Each row's block is two 16-byte loads (from its start: d, m and 12 nibble
// bytes; from byte 4: the 16 nibble bytes), put into 128-bit lanes with
// masked broadcasts, then unpacked to dwords.
LS_VNNI512 inline __m512i rows4(const uint8_t* r0, uint64_t rb) {
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0)));
  v = _mm512_mask_broadcast_i32x4(v, 0x00F0, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + rb)));
  v = _mm512_mask_broadcast_i32x4(v, 0x0F00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + 2 * rb)));
  return _mm512_mask_broadcast_i32x4(v, 0xF000, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + 3 * rb)));
}

struct GgufGroups {
  const uint8_t* rows;  // the tile's first row; rows are rb apart
  uint64_t rb;
  static constexpr bool kLaneIsRow = false;  // lane 4 L + x holds row 4 x + L
  GgufGroups at(int64_t g) const { return {rows + g * kRows * rb, rb}; }
  template <int G>
  LS_VNNI512 void load(int64_t k, int g, __m512i v[4], __m512& dw, __m512& mw) const {
    const uint8_t* b = rows + g * kRows * rb + k * static_cast<int64_t>(sizeof(math::BlockQ4_1));
    // Each row is its own stream here (64 per tile, too many for the
    // hardware prefetchers): every other block (40 bytes), the same place
    // in the next tile's rows, as the row-major kernels do.
    if ((k & 1) == 0)
      for (int r = 0; r < kRows; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(b + (G * kRows + r) * rb), _MM_HINT_T0);
    __m512i z[4], w[4];
    for (int x = 0; x < 4; ++x) {
      w[x] = rows4(b + 4 * x * rb, rb);      // d, m, qs[0 .. 11]
      z[x] = rows4(b + 4 * x * rb + 4, rb);  // qs[0 .. 15]
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    v[0] = _mm512_unpacklo_epi64(t0, t2);
    v[1] = _mm512_unpackhi_epi64(t0, t2);
    v[2] = _mm512_unpacklo_epi64(t1, t3);
    v[3] = _mm512_unpackhi_epi64(t1, t3);
    const __m512i dm = _mm512_unpacklo_epi64(_mm512_unpacklo_epi32(w[0], w[1]), _mm512_unpacklo_epi32(w[2], w[3]));
    dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
    mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
  }
};

// A group's 16 products (accd + accm) to y in row order.
template <class Src>
LS_VNNI512 inline void store_group(__m512 accd, __m512 accm, float* y) {
  __m512 sum = _mm512_add_ps(accd, accm);
  if constexpr (!Src::kLaneIsRow)
    sum = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), sum);
  _mm512_storeu_ps(y, sum);
}

// G groups of 16 rows (from src) against one token: y[16 G]. xs holds the
// token's [d, d sum] per block.
template <int G, class Src>
LS_VNNI512 void tile(const Src& src, const QBlock* xq, const float* xs, int64_t nb, float* y) {
  __m512 accd[G], accm[G];
  for (int g = 0; g < G; ++g) accd[g] = accm[g] = _mm512_setzero_ps();
  for (int64_t k = 0; k < nb; ++k) {
    __m512i a[8];
    act_dwords(xq[k], a);
    const __m512 xd = _mm512_set1_ps(xs[2 * k]), xsum = _mm512_set1_ps(xs[2 * k + 1]);
    for (int g = 0; g < G; ++g) {
      __m512i v[4];
      __m512 dw, mw;
      src.template load<G>(k, g, v, dw, mw);
      add_block(v, dw, mw, a, xd, xsum, accd[g], accm[g]);
    }
  }
  for (int g = 0; g < G; ++g) store_group<Src>(accd[g], accm[g], y + kRows * g);
}

// n_groups groups of 16 rows from src against one token.
template <class Src>
LS_VNNI512 void groups(const Src& src, int64_t n_groups, const QBlock* xq, int64_t nb, float* y) {
  float xs[2 * (kMaxIn / math::kQK)];
  act_scales(xq, nb, xs);
  int64_t g = 0;
  for (; g + 4 <= n_groups; g += 4) tile<4>(src.at(g), xq, xs, nb, y + g * kRows);
  for (; g + 2 <= n_groups; g += 2) tile<2>(src.at(g), xq, xs, nb, y + g * kRows);
  if (g < n_groups) tile<1>(src.at(g), xq, xs, nb, y + g * kRows);
}

// One group of 16 rows against T tokens (T <= 4): each block's weights are
// loaded (and, from GGUF rows, transposed) once for the T tokens, and each
// token's lanes run tile()'s float operations in tile()'s order, so every
// token gets the bits of its own one-token product. y[t * ldy + r].
template <int T, class Src>
LS_VNNI512 void tile_tokens(const Src& src, const QBlock* const xq[], const float* const xs[], int64_t nb, float* y,
                            int64_t ldy) {
  __m512 accd[T], accm[T];
  for (int t = 0; t < T; ++t) accd[t] = accm[t] = _mm512_setzero_ps();
  for (int64_t k = 0; k < nb; ++k) {
    __m512i v[4];
    __m512 dw, mw;
    src.template load<1>(k, 0, v, dw, mw);
    for (int t = 0; t < T; ++t) {
      __m512i a[8];
      act_dwords(xq[t][k], a);
      add_block(v, dw, mw, a, _mm512_set1_ps(xs[t][2 * k]), _mm512_set1_ps(xs[t][2 * k + 1]), accd[t], accm[t]);
    }
  }
  for (int t = 0; t < T; ++t) store_group<Src>(accd[t], accm[t], y + t * ldy);
}

// n_groups groups of 16 rows from src against n_tokens tokens (xq: nb blocks
// apart), up to four tokens per walk over a group's blocks.
template <class Src>
LS_VNNI512 void groups_tokens(const Src& src, int64_t n_groups, const QBlock* xq, int64_t n_tokens, int64_t nb,
                              float* y, int64_t ldy) {
  std::vector<float> scales(static_cast<size_t>(2 * nb * n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) act_scales(xq + t * nb, nb, scales.data() + 2 * nb * t);
  for (int64_t g = 0; g < n_groups; ++g) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += 4) {
      const QBlock* xqs[4];
      const float* xss[4];
      const int n = static_cast<int>(std::min<int64_t>(4, n_tokens - t0));
      for (int i = 0; i < n; ++i) {
        xqs[i] = xq + (t0 + i) * nb;
        xss[i] = scales.data() + 2 * nb * (t0 + i);
      }
      float* yg = y + t0 * ldy + g * kRows;
      switch (n) {
        case 1: tile_tokens<1>(src.at(g), xqs, xss, nb, yg, ldy); break;
        case 2: tile_tokens<2>(src.at(g), xqs, xss, nb, yg, ldy); break;
        case 3: tile_tokens<3>(src.at(g), xqs, xss, nb, yg, ldy); break;
        default: tile_tokens<4>(src.at(g), xqs, xss, nb, yg, ldy); break;
      }
    }
  }
}
#endif

}  // namespace

bool available(int64_t n_out, int64_t n_in) {
#if LS_X86_SIMD
  return avx512::vnni_supported() && n_out >= kRows && n_in > 0 && n_in % math::kQK == 0 && n_in <= kMaxIn;
#else
  (void)n_out;
  (void)n_in;
  return false;
#endif
}

void pack(const void* w, int64_t n_out, int64_t n_in, void* out) {
  const int64_t nb = n_in / math::kQK;
  const uint64_t rb = row_bytes(n_in);
  const auto* src = static_cast<const uint8_t*>(w);
  auto* dst = static_cast<uint8_t*>(out);
  const int64_t full = n_out / kRows * kRows;
  for (int64_t g = 0; g < full; g += kRows) {
    for (int64_t k = 0; k < nb; ++k) {
      uint8_t* o = dst + g * rb + k * kBlockBytes;
      for (int r = 0; r < kRows; ++r) {
        const auto* b = reinterpret_cast<const math::BlockQ4_1*>(src + (g + r) * rb) + k;
        std::memcpy(o + 2 * r, &b->d, 2);
        std::memcpy(o + 32 + 2 * r, &b->m, 2);
        for (int j = 0; j < 4; ++j) std::memcpy(o + 64 + 64 * j + 4 * r, b->qs + 4 * j, 4);
      }
    }
  }
  std::memcpy(dst + full * rb, src + full * rb, (n_out - full) * rb);
}

void gemv(const void* packed, int64_t n_out, int64_t n_in, int64_t r0, int64_t r1, const QBlock* xq, float* y) {
#if LS_X86_SIMD
  const uint64_t rb = row_bytes(n_in);
  const auto* base = static_cast<const uint8_t*>(packed);
  const int64_t full = n_out / kRows * kRows;
  const int64_t g_end = std::min(r1, full);
  if (g_end > r0) groups(PackedGroups{base + r0 * rb, kRows * rb}, (g_end - r0) / kRows, xq, n_in / math::kQK, y);
  // The tail rows are GGUF bytes: the row-major kernel.
  const int64_t t0 = std::max(r0, full);
  if (r1 > t0) avx512::quant_kernels(GgmlType::Q4_1).gemm(base + t0 * rb, rb, r1 - t0, xq, 1, n_in, y + (t0 - r0), 1);
#else
  (void)packed, (void)n_out, (void)n_in, (void)r0, (void)r1, (void)xq, (void)y;
#endif
}

void gemm(const void* packed, int64_t n_out, int64_t n_in, int64_t r0, int64_t r1, const QBlock* xq, int64_t n_tokens,
          float* y, int64_t ldy) {
#if LS_X86_SIMD
  const uint64_t rb = row_bytes(n_in);
  const int64_t nb = n_in / math::kQK;
  const auto* base = static_cast<const uint8_t*>(packed);
  const int64_t full = n_out / kRows * kRows;
  const int64_t g_end = std::min(r1, full);
  if (g_end > r0) groups_tokens(PackedGroups{base + r0 * rb, kRows * rb}, (g_end - r0) / kRows, xq, n_tokens, nb, y, ldy);
  const int64_t t0 = std::max(r0, full);
  for (int64_t t = 0; r1 > t0 && t < n_tokens; ++t)
    avx512::quant_kernels(GgmlType::Q4_1).gemm(base + t0 * rb, rb, r1 - t0, xq + t * nb, 1, n_in, y + t * ldy + (t0 - r0), 1);
#else
  (void)packed, (void)n_out, (void)n_in, (void)r0, (void)r1, (void)xq, (void)n_tokens, (void)y, (void)ldy;
#endif
}

void gemm_gguf(const void* rows, int64_t n_rows, int64_t n_in, const QBlock* xq, int64_t n_tokens, float* y,
               int64_t ldy) {
#if LS_X86_SIMD
  const uint64_t rb = row_bytes(n_in);
  const int64_t nb = n_in / math::kQK;
  const auto* base = static_cast<const uint8_t*>(rows);
  const int64_t full = n_rows / kRows * kRows;
  if (full > 0) groups_tokens(GgufGroups{base, rb}, full / kRows, xq, n_tokens, nb, y, ldy);
  for (int64_t t = 0; n_rows > full && t < n_tokens; ++t)
    avx512::quant_kernels(GgmlType::Q4_1).gemm(base + full * rb, rb, n_rows - full, xq + t * nb, 1, n_in, y + t * ldy + full, 1);
#else
  (void)rows, (void)n_rows, (void)n_in, (void)xq, (void)n_tokens, (void)y, (void)ldy;
#endif
}

void gemv_gguf(const void* rows, int64_t n_rows, int64_t n_in, const QBlock* xq, float* y) {
#if LS_X86_SIMD
  const uint64_t rb = row_bytes(n_in);
  const auto* base = static_cast<const uint8_t*>(rows);
  const int64_t full = n_rows / kRows * kRows;
  if (full > 0) groups(GgufGroups{base, rb}, full / kRows, xq, n_in / math::kQK, y);
  if (n_rows > full) avx512::quant_kernels(GgmlType::Q4_1).gemm(base + full * rb, rb, n_rows - full, xq, 1, n_in, y + full, 1);
#else
  (void)rows, (void)n_rows, (void)n_in, (void)xq, (void)y;
#endif
}

}  // namespace layerstream::kernels::cpu::q4_1x16

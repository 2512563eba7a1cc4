// AMX int8 tiles for the prefill GEMM of Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q5_K and Q6_K weights.
//
// One tile multiply (TDPBSSD) is 16 tokens x 16 weight rows x one 32-element
// block: C[m][n] = sum_j a[m][j] * b[n][j] in int32, where a is the tokens'
// quantised activations (QBlock.qs, read in place: tile rows are tokens, the
// row stride is one token's blocks) and b the weight rows' codes as signed
// bytes. The per-block scales are applied outside the tiles, in AVX-512:
//   y[m][n] += d_a[m] * d_w[n] * C[m][n]              (Q8_0; Q4_0, Q5_0: codes minus 8, 16)
//            + m_w[n] * d_a[m] * sum(a[m])            (Q4_1, Q4_K, Q5_K: unsigned codes, offset m)
// so the numbers are those of the VNNI kernels up to f32 rounding (exact
// integer block sums, f32 accumulation of the block terms in block order).
// A Q4_K / Q5_K super-block is 8 such 32-element blocks, each with its own scale and
// offset; a Q6_K 32-element block, with a scale per 16, is two tile
// multiplies, each with half of the codes zero.
//
// Weights are repacked per call, 16 rows (a panel) at a time, into the tile
// layout B (8 rows of 64 bytes: byte 4n + j % 4 of row j / 4 is row n's code
// j) with their scales beside: a panel's repack is reused by every token of
// the call, so it costs 1/n_tokens of the multiply. Up to 4 panels (64 rows)
// are repacked together, then the tokens go by 16 at a time over them (the
// 16 tokens' activations stay in L1 across the 4 panels). Tokens left over
// (n_tok % 16) take the AVX-512 VNNI kernel.
//
// Run time: needs AMX-TILE, AMX-INT8 and AVX-512 VNNI in CPUID, the tile
// state enabled in XCR0, and Linux's per-process permission for it
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)), asked once; without
// any of these supported() is false and callers take the VNNI kernels.
// Each call loads the tile configuration and releases the tiles on return, so
// a thread holds no tile state between calls.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/qdot.h"
#include "kernels/cpu/x86_simd.h"
#include "kernels/math/fp16.h"
#include "kernels/math/kquant_blocks.h"
#include "kernels/math/quant_blocks.h"

#if LS_X86_SIMD && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

#define LS_AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace layerstream::kernels::cpu::amx {
namespace {

using math::kQK;
constexpr int kTok = 16;       // tokens per A tile (C rows)
constexpr int kPanel = 16;     // weight rows per B tile (C columns)
constexpr int kPanels = 4;     // panels repacked together
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// Block k of a 16-row panel: the B tile, then the rows' scales and offsets.
struct alignas(64) PanelBlock {
  int8_t b[8 * 64];
  float d[kPanel];
  float m[kPanel];  // Q4_1 only
};

// The tile configuration (ldtilecfg's 64-byte layout).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0, 1: C (int32, 16 x 16); 2, 3: A (16 tokens x 32 bytes); 4, 5: B
// (8 x 64 bytes). Two of each: block k uses (0, 2, 4) or (1, 3, 5) by parity,
// so block k + 1's multiply runs while block k's result is scaled.
TileConfig make_config() {
  TileConfig c;
  for (int t : {0, 1}) c.rows[t] = kTok, c.colsb[t] = kPanel * 4;
  for (int t : {2, 3}) c.rows[t] = kTok, c.colsb[t] = kQK;
  for (int t : {4, 5}) c.rows[t] = kQK / 4, c.colsb[t] = kPanel * 4;
  return c;
}

LS_AMX inline float f16(uint16_t h) { return _cvtsh_ss(h); }  // F16C: exact, as math::f16_to_f32
LS_AMX inline __m256i nibbles(const uint8_t* qs) {  // elements 0..15 low nibbles, 16..31 high
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// How many tile blocks a weight block is (kPer), how many tile blocks a
// 32-element activation block takes (kSplit), and whether elements carry an
// offset m (kOffset).
template <bool kOffsetV, int kPerV, int kSplitV>
struct CodeLayout {
  static constexpr bool kOffset = kOffsetV;
  static constexpr int kPer = kPerV;
  static constexpr int kSplit = kSplitV;
};

// The 32-element types: scale d (and, Q4_1, offset m) in the block's head,
// block_codes() for the codes.
LS_AMX inline __m256i block_codes(const math::BlockQ8_0& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
}
LS_AMX inline __m256i block_codes(const math::BlockQ4_0& b) {
  return _mm256_sub_epi8(nibbles(b.qs), _mm256_set1_epi8(8));
}
LS_AMX inline __m256i block_codes(const math::BlockQ4_1& b) { return nibbles(b.qs); }
// Q5_0: nibble | (bit j of qh) << 4, minus 16.
LS_AMX inline __m256i block_codes(const math::BlockQ5_0& b) {
  uint32_t h;
  std::memcpy(&h, b.qh, 4);
  const __m256i hi = _mm256_and_si256(_mm256_movm_epi8(h), _mm256_set1_epi8(0x10));
  return _mm256_sub_epi8(_mm256_or_si256(nibbles(b.qs), hi), _mm256_set1_epi8(16));
}

// Codes<Block>::get: sub-block s (32 elements) of a weight block as 32 signed
// codes, with its scale d and offset m (element = d * code + m). This is the
// 32-element types' (Q8_0, Q4_0, Q4_1, Q5_0); the K-quants' are below.
template <class Block>
struct Codes : CodeLayout<std::is_same_v<Block, math::BlockQ4_1>, 1, 1> {
  LS_AMX static __m256i get(const Block& b, int, float* d, float* m) {
    *d = f16(b.d);
    if constexpr (Codes::kOffset) {
      *m = f16(b.m);
    } else {
      *m = 0.0f;
    }
    return block_codes(b);
  }
};

// Q4_K / Q5_K sub-block s: scale d * sc(s), offset -dmin * min(s), and the
// low (s even) or high (s odd) nibbles of qs[32 (s / 2) ..].
template <class Block>
LS_AMX inline __m256i k4_sub_nibbles(const Block& b, int s, float* d, float* m) {
  int sc = 0, mn = 0;
  math::k4_scale_min(b.scales, s, &sc, &mn);
  *d = f16(b.d) * static_cast<float>(sc);
  *m = -(f16(b.dmin) * static_cast<float>(mn));
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (s / 2)));
  return _mm256_and_si256(_mm256_srli_epi16(raw, 4 * (s % 2)), _mm256_set1_epi8(0x0F));
}

template <>
struct Codes<math::BlockQ4_K> : CodeLayout<true, 8, 1> {
  LS_AMX static __m256i get(const math::BlockQ4_K& b, int s, float* d, float* m) { return k4_sub_nibbles(b, s, d, m); }
};

// Index vectors of the transpose below (permutex2var: 0-15 first source,
// 16-31 second).
struct TransposeIdx {
  alignas(64) int32_t s1[2][16], s2[2][16], s3[2][16];
  TransposeIdx() {
    for (int h = 0; h < 2; ++h)
      for (int g = 0; g < 4; ++g)
        for (int j = 0; j < 4; ++j) s1[h][4 * g + j] = (j < 2 ? j * 8 : 16 + (j - 2) * 8) + g + 4 * h;
    for (int a = 0; a < 2; ++a)
      for (int gg = 0; gg < 2; ++gg)
        for (int n = 0; n < 8; ++n) s2[a][8 * gg + n] = (n < 4 ? 0 : 16 - 4) + 4 * (2 * a + gg) + n;
    for (int gg = 0; gg < 2; ++gg)
      for (int n = 0; n < 16; ++n) s3[gg][n] = (n < 8 ? 0 : 16 - 8) + 8 * gg + n;
  }
};

// out[g][n] = m[n][g] for a 16 x 8 matrix of 4-byte groups m (row n: row n's
// 32 codes): three rounds of two-source permutes (4-row, 8-row, 16-row
// groups), 24 in all, instead of 8 gathers.
LS_AMX inline void transpose_16x8(const int32_t* m, int8_t* out) {
  static const TransposeIdx ix;
  __m512i z[8], u[4][2];
  for (int i = 0; i < 8; ++i) z[i] = _mm512_load_si512(m + 16 * i);
  const __m512i s1[2] = {_mm512_load_si512(ix.s1[0]), _mm512_load_si512(ix.s1[1])};
  const __m512i s2[2] = {_mm512_load_si512(ix.s2[0]), _mm512_load_si512(ix.s2[1])};
  const __m512i s3[2] = {_mm512_load_si512(ix.s3[0]), _mm512_load_si512(ix.s3[1])};
  for (int i = 0; i < 4; ++i)
    for (int h = 0; h < 2; ++h) u[i][h] = _mm512_permutex2var_epi32(z[2 * i], s1[h], z[2 * i + 1]);
  for (int h = 0; h < 2; ++h)
    for (int a = 0; a < 2; ++a) {
      const __m512i v = _mm512_permutex2var_epi32(u[0][h], s2[a], u[1][h]);
      const __m512i w = _mm512_permutex2var_epi32(u[2][h], s2[a], u[3][h]);
      for (int gg = 0; gg < 2; ++gg)
        _mm512_store_si512(out + 64 * (4 * h + 2 * a + gg), _mm512_permutex2var_epi32(v, s3[gg], w));
    }
}

// Q5_K: Q4_K plus bit s of qh[l] as the code's 5th bit (codes 0..31).
template <>
struct Codes<math::BlockQ5_K> : CodeLayout<true, 8, 1> {
  LS_AMX static __m256i get(const math::BlockQ5_K& b, int s, float* d, float* m) {
    const __m256i lo = k4_sub_nibbles(b, s, d, m);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    const __m256i hi = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, s), 4), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(lo, hi);
  }
};

// Q6_K: 16-element scales. Each 32-element block j becomes two tile blocks
// (kSplit): its first 16 codes with zeros after them (scale d * sc[2j]),
// then zeros and its last 16 codes (d * sc[2j + 1]), both multiplied by the
// same 32 activations. Codes: (ql nibble | 2 qh bits << 4) - 32.
template <>
struct Codes<math::BlockQ6_K> : CodeLayout<false, 16, 2> {  // 16 tile blocks per super-block
  LS_AMX static __m256i get(const math::BlockQ6_K& b, int s, float* d, float* m) {
    const int j = s / 2, h = s % 2, n = j / 4, k = j % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * n + 32 * (k % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * n));
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql, 4 * (k / 2)), _mm256_set1_epi8(0x0F));
    const __m256i hi = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * k), 4), _mm256_set1_epi8(0x30));
    const __m256i codes = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
    *d = f16(b.d) * static_cast<float>(b.scales[s]);  // scales[2 j + h]
    *m = 0.0f;
    return _mm256_maskz_mov_epi8(h ? 0xFFFF0000u : 0x0000FFFFu, codes);
  }
};

// Rows [0, n_rows) (n_rows <= 16) of a panel into out[0 .. nb) (nb tile
// blocks: 32-element blocks times kSplit); missing rows are zero (their
// results are not stored).
template <class Block>
LS_AMX void repack(const uint8_t* rows, uint64_t row_bytes, int n_rows, int64_t nb, PanelBlock* out) {
  using C = Codes<Block>;
  alignas(64) int32_t t[kPanel][8];  // row n's 32 codes as 8 groups of 4
  if (n_rows < kPanel) std::memset(t, 0, sizeof t);
  for (int64_t k = 0; k < nb; ++k) {
    PanelBlock& pb = out[k];
    for (int n = 0; n < n_rows; ++n) {
      const Block& b = reinterpret_cast<const Block*>(rows + n * row_bytes)[k / C::kPer];
      _mm256_store_si256(reinterpret_cast<__m256i*>(t[n]), C::get(b, static_cast<int>(k % C::kPer), &pb.d[n], &pb.m[n]));
    }
    for (int n = n_rows; n < kPanel; ++n) pb.d[n] = pb.m[n] = 0.0f;
    transpose_16x8(&t[0][0], pb.b);  // B row g = group g of rows 0..15
  }
}

// Scales block k's C tile (in c) into the 16 tokens' accumulators; a: the
// tokens' block k, ds (kOffset): their d * sum, precomputed per call.
template <bool kOffset>
LS_AMX inline void scale_into(const int32_t* c, const PanelBlock& pb, const QBlock* a, const float* ds, int64_t nb,
                              __m512 (&acc)[kTok]) {
  const __m512 dw = _mm512_load_ps(pb.d);
  const __m512 mw = kOffset ? _mm512_load_ps(pb.m) : _mm512_setzero_ps();
  for (int m = 0; m < kTok; ++m) {
    const QBlock& q = a[m * nb];
    const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(c + m * kPanel));
    acc[m] = _mm512_fmadd_ps(v, _mm512_mul_ps(dw, _mm512_set1_ps(q.d)), acc[m]);
    if (kOffset) acc[m] = _mm512_fmadd_ps(mw, _mm512_set1_ps(ds[m * nb]), acc[m]);
  }
}

// The tiles take their register numbers as immediates: C tile kC's block
// uses A tile kC + 2 and B tile kC + 4 (make_config).
template <int kC>
LS_AMX inline void multiply_into(const uint8_t* a, int64_t stride, const int8_t* b) {
  if constexpr (kC == 0) {
    _tile_zero(0);
    _tile_loadd(2, a, stride);
    _tile_loadd(4, b, 64);
    _tile_dpbssd(0, 2, 4);
  } else {
    _tile_zero(1);
    _tile_loadd(3, a, stride);
    _tile_loadd(5, b, 64);
    _tile_dpbssd(1, 3, 5);
  }
}
template <int kC>
LS_AMX inline void store_c(int32_t* c) {
  if constexpr (kC == 0) {
    _tile_stored(0, c, kPanel * 4);
  } else {
    _tile_stored(1, c, kPanel * 4);
  }
}

// 16 tokens (xq, each nb blocks) x one panel; results for n_rows <= 16 rows
// into y[m * ldy + n].
// nt = nb * kSplit tile blocks; tile block v multiplies activation block v / kSplit.
template <bool kOffset, int kSplit>
LS_AMX void tile_16x16(const PanelBlock* panel, const QBlock* xq, const float* ds, int64_t nb, int n_rows, float* y,
                       int64_t ldy) {
  const int64_t nt = nb * kSplit;
  alignas(64) int32_t c[2][kTok * kPanel];
  __m512 acc[kTok];
  for (auto& v : acc) v = _mm512_setzero_ps();
  const auto* a = reinterpret_cast<const uint8_t*>(xq) + offsetof(QBlock, qs);
  const int64_t stride = nb * static_cast<int64_t>(sizeof(QBlock));
  const auto a_at = [&](int64_t v) { return a + v / kSplit * sizeof(QBlock); };
  // Block k's multiply into C (k & 1) while block k - 1's result is scaled.
  multiply_into<0>(a_at(0), stride, panel[0].b);
  for (int64_t k = 0;; ++k) {
    const bool last = k + 1 == nt;
    if ((k & 1) == 0) {
      if (!last) multiply_into<1>(a_at(k + 1), stride, panel[k + 1].b);
      store_c<0>(c[0]);
    } else {
      if (!last) multiply_into<0>(a_at(k + 1), stride, panel[k + 1].b);
      store_c<1>(c[1]);
    }
    scale_into<kOffset>(c[k & 1], panel[k], xq + k / kSplit, kOffset ? ds + k : nullptr, nb, acc);
    if (last) break;
  }
  const __mmask16 keep = static_cast<__mmask16>((1u << n_rows) - 1);
  for (int m = 0; m < kTok; ++m) _mm512_mask_storeu_ps(y + m * ldy, keep, acc[m]);
}

template <class Block, GgmlType kType>
LS_AMX void gemm(const void* rows, uint64_t row_bytes, int64_t n_rows, const QBlock* xq, int64_t n_tok, int64_t n,
                 float* y, int64_t ldy) {
  using C = Codes<Block>;
  const int64_t nb = n / kQK, nt = nb * C::kSplit;
  thread_local std::vector<PanelBlock> buf;  // kPanels panels of nt tile blocks
  if (buf.size() < static_cast<size_t>(kPanels * nt)) buf.resize(kPanels * nt);
  static const TileConfig config = make_config();
  const auto* base = static_cast<const uint8_t*>(rows);
  const int64_t tok16 = n_tok / kTok * kTok;
  thread_local std::vector<float> ds;  // offset types: d * sum of each token's blocks
  if (Codes<Block>::kOffset) {
    if (ds.size() < static_cast<size_t>(tok16 * nb)) ds.resize(tok16 * nb);
    for (int64_t i = 0; i < tok16 * nb; ++i) ds[i] = xq[i].d * static_cast<float>(xq[i].sum);
  }
  _tile_loadconfig(&config);
  for (int64_t r0 = 0; r0 < n_rows; r0 += kPanels * kPanel) {
    const int64_t group = std::min<int64_t>(kPanels * kPanel, n_rows - r0);
    const int panels = static_cast<int>((group + kPanel - 1) / kPanel);
    for (int p = 0; p < panels; ++p) {
      const int pr = static_cast<int>(std::min<int64_t>(kPanel, group - p * kPanel));
      repack<Block>(base + (r0 + p * kPanel) * row_bytes, row_bytes, pr, nt, buf.data() + p * nt);
    }
    for (int64_t t = 0; t < tok16; t += kTok)
      for (int p = 0; p < panels; ++p) {
        const int pr = static_cast<int>(std::min<int64_t>(kPanel, group - p * kPanel));
        tile_16x16<C::kOffset, C::kSplit>(buf.data() + p * nt, xq + t * nb,
                                          Codes<Block>::kOffset ? ds.data() + t * nb : nullptr, nb, pr,
                                          y + t * ldy + r0 + p * kPanel, ldy);
      }
  }
  _tile_release();
  if (tok16 < n_tok)
    avx512::quant_kernels(kType).gemm(rows, row_bytes, n_rows, xq + tok16 * nb, n_tok - tok16, n, y + tok16 * ldy, ldy);
}

}  // namespace

bool supported() {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    // CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8.
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 24)) || !(edx & (1u << 25))) return false;
    if (!avx512::vnni_supported()) return false;  // the scaling is AVX-512 (and implies OSXSAVE)
    // XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA): the OS manages tile state.
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    // Linux hands out the tile data state per process on request (5.16+).
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return yes;
}

QGemmFn gemm_fn(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return gemm<math::BlockQ8_0, GgmlType::Q8_0>;
    case GgmlType::Q4_0: return gemm<math::BlockQ4_0, GgmlType::Q4_0>;
    case GgmlType::Q4_1: return gemm<math::BlockQ4_1, GgmlType::Q4_1>;
    case GgmlType::Q5_0: return gemm<math::BlockQ5_0, GgmlType::Q5_0>;
    case GgmlType::Q4_K: return gemm<math::BlockQ4_K, GgmlType::Q4_K>;
    case GgmlType::Q5_K: return gemm<math::BlockQ5_K, GgmlType::Q5_K>;
    case GgmlType::Q6_K: return gemm<math::BlockQ6_K, GgmlType::Q6_K>;
    default: return nullptr;
  }
}

}  // namespace layerstream::kernels::cpu::amx

#else  // not x86-64 Linux GCC/Clang

namespace layerstream::kernels::cpu::amx {
bool supported() { return false; }
QGemmFn gemm_fn(GgmlType) { return nullptr; }
}  // namespace layerstream::kernels::cpu::amx

#endif

// Prefill GEMM for the float weight types (F32, F16, BF16) in f32: each task
// decodes 4 weight rows at a time into a per-thread f32 buffer (exactly:
// f16/bf16 -> f32), then 4 x 4 register tiles (4 rows x 4 tokens, 16
// accumulators) walk the tokens, so each decoded weight vector is used for 4
// tokens and each activation vector for 4 rows. Same numerics as the exact
// path up to the f32 summation order.
#include <algorithm>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/x86_simd.h"

namespace layerstream::kernels::cpu {
namespace {

constexpr int kR = 4, kT = 4;

// out[t * ldo + r] = w_r . x_t for r < R, t < T (w rows and x tokens n apart).
template <int R, int T>
void tile_generic(const float* w, const float* x, int64_t n, float* out, int64_t ldo) {
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[t * ldo + r] = generic::dot_f32(w + r * n, x + t * n, n);
}

#if LS_X86_SIMD
template <int R, int T>
LS_AVX512F void tile_avx512(const float* w, const float* x, int64_t n, float* out, int64_t ldo) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_ps(m, w + r * n + i);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * n + i);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[t * ldo + r] = _mm512_reduce_add_ps(acc[r][t]);
}
#endif

using TileFn = void (*)(const float*, const float*, int64_t, float*, int64_t);
struct Tiles {
  TileFn full, rows_only, tokens_only, one;  // R x T, R x 1, 1 x T, 1 x 1
};

Tiles tiles(CpuIsa isa) {
#if LS_X86_SIMD
  static const bool has_avx512 = avx512::supported();
  if (isa != CpuIsa::kGeneric && isa != CpuIsa::kAvx2 && has_avx512)
    return {tile_avx512<kR, kT>, tile_avx512<kR, 1>, tile_avx512<1, kT>, tile_avx512<1, 1>};
#endif
  (void)isa;
  return {tile_generic<kR, kT>, tile_generic<kR, 1>, tile_generic<1, kT>, tile_generic<1, 1>};
}

}  // namespace

void gemm_f32(const MatmulParams& p, ThreadPool* pool, CpuIsa isa) {
  const RowKernels k = row_kernels(p.w_type);
  const Tiles tl = tiles(isa);
  const uint64_t row_bytes = ggml_row_bytes(ggml_type_traits(p.w_type), p.n_in);
  const auto* w = static_cast<const uint8_t*>(p.w);
  const int64_t n = p.n_in;
  // Rows to the pool in groups of kR, so only the matrix's last group is partial.
  const int64_t n_groups = (p.n_out + kR - 1) / kR;
  parallel_rows(pool, n_groups, 4, [&](int64_t gb, int64_t ge) {
    const int64_t begin = gb * kR, end = std::min(ge * kR, p.n_out);
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>(kR * n)) buf.resize(kR * n);
    for (int64_t r = begin; r < end; r += kR) {
      const int64_t rows = std::min<int64_t>(kR, end - r);
      for (int64_t i = 0; i < rows; ++i) k.decode(w + (r + i) * row_bytes, 0, n, buf.data() + i * n);
      for (int64_t t = 0; t < p.n_tokens; t += kT) {
        const int64_t toks = std::min<int64_t>(kT, p.n_tokens - t);
        float* out = p.y + t * p.n_out + r;
        const float* x = p.x + t * n;
        if (rows == kR && toks == kT) {
          tl.full(buf.data(), x, n, out, p.n_out);
        } else if (rows == kR) {
          for (int64_t j = 0; j < toks; ++j) tl.rows_only(buf.data(), x + j * n, n, out + j * p.n_out, p.n_out);
        } else {
          for (int64_t i = 0; i < rows; ++i) {
            if (toks == kT) {
              tl.tokens_only(buf.data() + i * n, x, n, out + i, p.n_out);
            } else {
              for (int64_t j = 0; j < toks; ++j) tl.one(buf.data() + i * n, x + j * n, n, out + j * p.n_out + i, p.n_out);
            }
          }
        }
      }
    }
  });
}

}  // namespace layerstream::kernels::cpu

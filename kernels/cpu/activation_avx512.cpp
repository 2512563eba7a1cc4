// AVX-512 gated activations: silu(g) * u and gelu_tanh(g) * u, 16 lanes at a
// time, both as g * sigmoid(z) * u = g * u / (1 + exp(-z)) with z = g (SiLU)
// or z = 2 sqrt(2/pi) (g + 0.044715 g^3) (GELU's tanh form: 0.5 (1 + tanh(y))
// = sigmoid(2 y)). exp: x = n ln2 + r (|r| <= ln2 / 2, ln2 in two parts),
// exp(r) by its degree-7 Taylor polynomial (relative error < 2e-8 before f32
// rounding), times 2^n (vscalefps). Arguments are clamped to +-87 so the
// sum stays finite: the result then is g * u / (huge) -> 0 or g * u, which is
// what sigmoid's tails give in f32. The scalar math (kernels/math/activation.h)
// is the reference; cpu_ops_test checks both against float64.
#include <cstdint>

#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/x86_simd.h"

#if LS_X86_SIMD

namespace layerstream::kernels::cpu::avx512 {
namespace {

LS_AVX512 inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(87.0f)), _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln2 high part (exact in n * hi)
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);       // ln2 low part
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// g * u / (1 + exp(-z(g))) over n elements (a masked tail).
template <class Z>
LS_AVX512 inline void gated(const float* gate, const float* up, float* out, int64_t n, Z z) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), z(g)));
    _mm512_mask_storeu_ps(out + i, m, _mm512_div_ps(_mm512_mul_ps(g, u), _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  }
}

}  // namespace

LS_AVX512 void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  gated(gate, up, out, n, [](__m512 g) LS_AVX512 { return g; });
}

LS_AVX512 void gelu_mul(const float* gate, const float* up, float* out, int64_t n) {
  gated(gate, up, out, n, [](__m512 g) LS_AVX512 {
    const __m512 g2 = _mm512_mul_ps(g, g);
    const __m512 inner = _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), g2, _mm512_set1_ps(1.0f));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(2 * 0.7978845608028654f), g), inner);
  });
}

}  // namespace layerstream::kernels::cpu::avx512

#endif  // LS_X86_SIMD

// Vectorised gated activations for the CPU kernels (activation_avx512.cpp):
// out[i] = silu(gate[i]) * up[i] or gelu_tanh(gate[i]) * up[i], i < n, within
// a few f32 ulps of kernels/math/activation.h. REQUIRES avx512::supported()
// (dot.h). Pure and thread-safe; out may alias gate or up.
#pragma once

#include <cstdint>

namespace layerstream::kernels::cpu::avx512 {
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void gelu_mul(const float* gate, const float* up, float* out, int64_t n);
}  // namespace layerstream::kernels::cpu::avx512

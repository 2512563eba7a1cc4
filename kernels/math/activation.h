// Activation functions shared by the CPU and CUDA kernels.
#pragma once

#include <cmath>

#include "kernels/math/host_device.h"

namespace layerstream::math {

// silu(g) = g * sigmoid(g)
LS_HD float silu(float g) { return g / (1.0f + expf(-g)); }

// The SwiGLU gate: silu(gate) * up.
LS_HD float silu_mul(float gate, float up) { return silu(gate) * up; }

// GELU, tanh approximation (as Gemma and llama.cpp's ggml_gelu use):
//   0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
LS_HD float gelu_tanh(float g) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * g * (1.0f + 0.044715f * g * g)));
}

// The GeGLU gate: gelu(gate) * up.
LS_HD float gelu_mul(float gate, float up) { return gelu_tanh(gate) * up; }

// gpt-oss's gate (llama.cpp's swiglu_oai): the gate clamped from above and
// the up projection clamped to [-limit, limit], then
//   x sigmoid(alpha x) (y + 1),  alpha = 1.702, limit = 7.
constexpr float kSwigluOaiAlpha = 1.702f, kSwigluOaiLimit = 7.0f;
LS_HD float swiglu_oai(float gate, float up) {
  const float x = kSwigluOaiLimit < gate ? kSwigluOaiLimit : gate;  // a NaN gate stays NaN
  const float y = up < -kSwigluOaiLimit ? -kSwigluOaiLimit : (kSwigluOaiLimit < up ? kSwigluOaiLimit : up);
  return x / (1.0f + expf(-kSwigluOaiAlpha * x)) * (y + 1.0f);
}

}  // namespace layerstream::math

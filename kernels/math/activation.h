// Activation functions shared by the CPU and CUDA kernels.
#pragma once

#include <cmath>

#include "kernels/math/host_device.h"

namespace layerstream::math {

// silu(g) = g * sigmoid(g)
LS_HD float silu(float g) { return g / (1.0f + expf(-g)); }

// The SwiGLU gate: silu(gate) * up.
LS_HD float silu_mul(float gate, float up) { return silu(gate) * up; }

}  // namespace layerstream::math

// Factory for the cuda backend's Kernels (kernels/cuda/cuda_kernels.cu).
// Plain C++ header: no CUDA types, so kernels.cpp includes it in any build
// that has the CUDA backend.
#pragma once

#include <memory>

#include "kernels/kernels.h"

namespace layerstream::kernels {

// DeviceError naming the cause when no device can be used or cuBLAS fails to start.
Result<std::unique_ptr<Kernels>> make_cuda_kernels();

}  // namespace layerstream::kernels

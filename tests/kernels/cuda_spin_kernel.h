// launch_spin(): one thread that busy-waits `seconds` of GPU time on `stream`.
#pragma once

#include <cuda_runtime_api.h>

namespace layerstream::testing {

cudaError_t launch_spin(cudaStream_t stream, double seconds);

}  // namespace layerstream::testing

// The cuda backend: cudaMalloc arena, cudaHostAlloc / cudaHostRegister pinned
// memory, non-blocking streams, timing events, NVTX ranges. Compiled only when
// LAYERSTREAM_HAVE_CUDA_BACKEND.
#pragma once

#include <memory>

#include "runtime/device/device.h"

namespace layerstream::cuda {

// Opens device `options.cuda_device`; InvalidArgument when the index is out of
// range, DeviceError when the runtime fails (naming the call).
Result<std::unique_ptr<Device>> open_cuda_device(const DeviceOptions& options);

}  // namespace layerstream::cuda

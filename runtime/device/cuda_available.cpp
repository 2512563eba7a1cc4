// cuda_device_available(): whether this process can use a CUDA device.
// Build machines have the CUDA runtime but no driver; cudaGetDeviceCount then
// fails with cudaErrorInsufficientDriver, which we report as "no device".
#include <string>

#include "layerstream/config.h"
#include "runtime/device/device.h"

#if LAYERSTREAM_HAVE_CUDA_BACKEND
#include <cuda_runtime_api.h>
#endif

namespace layerstream {

Status cuda_device_available() {
#if LAYERSTREAM_HAVE_CUDA_BACKEND
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    std::string why = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();  // clear the (non-sticky) error
    return Status::NotFound("no CUDA device: " + why);
  }
  if (count == 0) return Status::NotFound("no CUDA device: cudaGetDeviceCount returned 0");
  return Status::OK();
#else
  return Status::Unsupported("no CUDA device: layerstream was built without the CUDA backend (LAYERSTREAM_CUDA=OFF or nvcc not found)");
#endif
}

}  // namespace layerstream

// Backend names and selection (open_device).
#include <string>

#include "runtime/core/log.h"
#include "runtime/device/device.h"
#include "runtime/device/host/host_device.h"

#if LAYERSTREAM_HAVE_CUDA_BACKEND
#include "runtime/device/cuda/cuda_device.h"
#endif

namespace layerstream {

namespace {

Result<std::unique_ptr<Device>> open_cuda(const DeviceOptions& options) {
#if LAYERSTREAM_HAVE_CUDA_BACKEND
  return cuda::open_cuda_device(options);
#else
  return Status::Unsupported("backend 'cuda': layerstream was built without the CUDA backend");
#endif
}

}  // namespace

Result<std::unique_ptr<Device>> open_device(const DeviceOptions& options) {
  switch (options.backend) {
    case BackendKind::kHost:
      return host::open_host_device(options);
    case BackendKind::kCuda: {
      Status available = cuda_device_available();
      if (!available.ok()) return available.WithContext("backend 'cuda' requested");
      return open_cuda(options);
    }
    case BackendKind::kAuto: {
      Status available = cuda_device_available();
      if (available.ok()) {
        LS_LOG_INFO("device: auto picked cuda (a CUDA device is present)");
        return open_cuda(options);
      }
      LS_LOG_INFO("device: auto picked host because {}", available.message());
      return host::open_host_device(options);
    }
  }
  return Status::InvalidArgument("open_device: unknown backend kind");
}

}  // namespace layerstream

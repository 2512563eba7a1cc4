#include "runtime/device/cuda/cuda_check.h"

#include <mutex>
#include <string>

#include "fmt/format.h"
#include "runtime/core/log.h"

namespace layerstream::cuda {
namespace {

std::mutex g_mu;
Status g_lost;  // guarded by g_mu; non-OK once a sticky error was seen

}  // namespace

bool is_sticky_error(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
    case cudaErrorExternalDevice:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

Status cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  std::string what = fmt::format("{} failed at {}:{}: {}: {}", call, file, line, cudaGetErrorName(err),
                                 cudaGetErrorString(err));
  if (!is_sticky_error(err)) {
    cudaGetLastError();  // clear it so the next check does not report it again
    return Status::DeviceError(what);
  }
  Status lost = Status::DeviceError(
      "the CUDA context is lost (sticky error; every later CUDA call in this process fails, restart it): " + what);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_lost.ok()) {
    g_lost = lost;
    LS_LOG_ERROR("{}", lost.message());
  }
  return lost;
}

Status context_status() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_lost;
}

}  // namespace layerstream::cuda

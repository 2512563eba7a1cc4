// Checks for the CUDA kernels. CUDA runtime calls use the one runtime check,
// LS_CUDA_RETURN_IF_ERROR from runtime/device/cuda/cuda_check.h (it names the
// statement, file:line and error, clears a non-sticky error from the
// runtime's last-error slot and marks the context lost on a sticky one); this
// header adds the check that follows every kernel launch and the cuBLAS check.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "layerstream/status.h"
#include "runtime/device/cuda/cuda_check.h"

namespace layerstream::kernels::cuda {

// The runtime's check, so kernel code says cuda_error(...) as before.
using ::layerstream::cuda::cuda_error;

inline Status cublas_error(cublasStatus_t st, const char* what, const char* file, int line) {
  return Status::DeviceError(std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(st)) +
                             " at " + file + ":" + std::to_string(line));
}

}  // namespace layerstream::kernels::cuda

namespace layerstream::kernels::cuda {

// The check that follows every kernel launch: a launch error names the kernel.
// cudaGetLastError() both reads and clears the slot, so a bad launch is
// reported once; a sticky error (a fault of an earlier kernel) marks the
// context lost through cuda_error().
inline Status check_launch(const char* kernel_name, const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status::OK();
  return cuda_error(err, (std::string("launch of kernel ") + kernel_name).c_str(), file, line);
}

}  // namespace layerstream::kernels::cuda

#define LS_CUDA_CHECK_LAUNCH(kernel_name)                                                                  \
  do {                                                                                                     \
    const ::layerstream::Status _ls_launch_st =                                                            \
        ::layerstream::kernels::cuda::check_launch(kernel_name, __FILE__, __LINE__);                       \
    if (!_ls_launch_st.ok()) return _ls_launch_st;                                                         \
  } while (0)

#define LS_CUBLAS_RETURN_IF_ERROR(expr)                                                      \
  do {                                                                                       \
    cublasStatus_t _ls_cublas_st = (expr);                                                   \
    if (_ls_cublas_st != CUBLAS_STATUS_SUCCESS)                                              \
      return ::layerstream::kernels::cuda::cublas_error(_ls_cublas_st, #expr, __FILE__, __LINE__); \
  } while (0)

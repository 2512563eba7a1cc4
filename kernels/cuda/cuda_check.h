// The one CUDA / cuBLAS check for the kernels: every runtime call and every
// kernel launch goes through these, and a failure becomes a DeviceError that
// names the statement (or kernel), the error and the source line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "layerstream/status.h"

namespace layerstream::kernels::cuda {

inline Status cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  return Status::DeviceError(std::string(what) + " failed: " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ") at " + file + ":" + std::to_string(line));
}

inline Status cublas_error(cublasStatus_t st, const char* what, const char* file, int line) {
  return Status::DeviceError(std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(st)) +
                             " at " + file + ":" + std::to_string(line));
}

}  // namespace layerstream::kernels::cuda

// Returns a DeviceError from the enclosing function when a CUDA runtime call fails.
#define LS_CUDA_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                    \
    cudaError_t _ls_cuda_err = (expr);                                                    \
    if (_ls_cuda_err != cudaSuccess)                                                      \
      return ::layerstream::kernels::cuda::cuda_error(_ls_cuda_err, #expr, __FILE__, __LINE__); \
  } while (0)

// Follows every kernel launch: reports a launch error naming the kernel.
#define LS_CUDA_CHECK_LAUNCH(kernel_name)                                                   \
  do {                                                                                      \
    cudaError_t _ls_cuda_err = cudaGetLastError();                                          \
    if (_ls_cuda_err != cudaSuccess)                                                        \
      return ::layerstream::kernels::cuda::cuda_error(_ls_cuda_err, "launch of kernel " kernel_name, __FILE__, \
                                                      __LINE__);                           \
  } while (0)

#define LS_CUBLAS_RETURN_IF_ERROR(expr)                                                      \
  do {                                                                                       \
    cublasStatus_t _ls_cublas_st = (expr);                                                   \
    if (_ls_cublas_st != CUBLAS_STATUS_SUCCESS)                                              \
      return ::layerstream::kernels::cuda::cublas_error(_ls_cublas_st, #expr, __FILE__, __LINE__); \
  } while (0)

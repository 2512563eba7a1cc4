// The one CUDA runtime check for the cuda backend: LS_CUDA_RETURN_IF_ERROR
// turns a failed call into a DeviceError naming the statement, file:line, the
// CUDA error name and its description.
//
// Sticky errors (an illegal address, a failed launch, an uncorrectable ECC
// error, ...) leave the CUDA context unusable: every later CUDA call in this
// process fails. The first one is remembered process-wide; from then on
// context_status() returns a DeviceError saying the context is lost, so the
// run stops with that message instead of a cascade of unrelated failures.
// Thread safety: all functions may be called from any thread.
#pragma once

#include <cuda_runtime_api.h>

#include "layerstream/status.h"

namespace layerstream::cuda {

// True for errors after which the CUDA context cannot be used again.
bool is_sticky_error(cudaError_t err);

// DeviceError for a failed `call`. Clears a non-sticky error from the
// runtime's last-error slot; records a sticky one (see context_status()).
Status cuda_error(cudaError_t err, const char* call, const char* file, int line);

// OK while the context is usable; the "context is lost" DeviceError after a sticky error.
Status context_status();

}  // namespace layerstream::cuda

#define LS_CUDA_RETURN_IF_ERROR(call)                                                      \
  do {                                                                                     \
    cudaError_t _ls_cuda_err = (call);                                                     \
    if (_ls_cuda_err != cudaSuccess)                                                       \
      return ::layerstream::cuda::cuda_error(_ls_cuda_err, #call, __FILE__, __LINE__);     \
  } while (0)

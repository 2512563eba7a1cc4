// Helpers shared by the GPU benchmark programs (bench/gpu/): the device gate,
// the weight types to sweep, random encoded weights, a host stream for the
// CPU kernels and event timing on a CUDA stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/math/convert_row.h"
#include "kernels/math/ggml_type.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_owners.h"
#include "runtime/device/device.h"
#include "runtime/device/inline_stream.h"

namespace layerstream::gpubench {

// Exit code of a GPU benchmark program that found no usable CUDA device.
constexpr int kExitNoDevice = 2;

// Every weight type the type table marks supported, in id order, so types
// added to the table later are swept without touching the benchmarks.
inline std::vector<GgmlType> supported_weight_types() {
  std::vector<GgmlType> out;
  for (uint32_t id = 0; id < 256; ++id) {
    const auto t = ggml_type_traits(id);
    if (t && t->supported) out.push_back(t->type);
  }
  return out;
}

// A weight [n_rows][n_cols] of `type` encoded from uniform(-amp, amp) floats.
// rows_distinct rows are encoded and the rest repeat them (speed does not
// depend on content). Unsupported when the type has no encoder.
inline Result<std::vector<uint8_t>> random_weight(GgmlType type, int64_t n_rows, int64_t n_cols, std::mt19937_64& rng,
                                                  int64_t rows_distinct, float amp = 1.0f) {
  const uint64_t rb = ggml_row_bytes(ggml_type_traits(type), n_cols);
  std::vector<uint8_t> w(rb * n_rows);
  std::uniform_real_distribution<float> d(-amp, amp);
  std::vector<float> row(n_cols);
  const int64_t distinct = std::min(rows_distinct, n_rows);
  for (int64_t r = 0; r < distinct; ++r) {
    for (float& v : row) v = d(rng);
    LS_RETURN_IF_ERROR(math::encode_row(type, row.data(), n_cols, w.data() + r * rb));
  }
  for (int64_t r = distinct; r < n_rows; ++r) std::memcpy(w.data() + r * rb, w.data() + (r % distinct) * rb, rb);
  return w;
}

// Device copy of a host vector.
template <typename T>
Result<cuda::DeviceBuffer> upload(const std::vector<T>& v) {
  LS_ASSIGN_OR_RETURN(auto d, cuda::device_alloc(std::max<size_t>(v.size() * sizeof(T), 1), "cudaMalloc(upload)"));
  LS_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
Result<std::vector<T>> download(const void* d, size_t n) {
  std::vector<T> v(n);
  LS_CUDA_RETURN_IF_ERROR(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// Seconds `fn` takes on `s`, measured with events around `reps` calls.
inline Result<double> time_on_stream(cudaStream_t s, int reps, const std::function<Status()>& fn) {
  LS_ASSIGN_OR_RETURN(auto e0, cuda::create_event(cudaEventDefault, "cudaEventCreate(t0)"));
  LS_ASSIGN_OR_RETURN(auto e1, cuda::create_event(cudaEventDefault, "cudaEventCreate(t1)"));
  LS_CUDA_RETURN_IF_ERROR(cudaEventRecord(e0.get(), s));
  for (int i = 0; i < reps; ++i) LS_RETURN_IF_ERROR(fn());
  LS_CUDA_RETURN_IF_ERROR(cudaEventRecord(e1.get(), s));
  LS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e1.get()));
  float ms = 0;
  LS_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, e0.get(), e1.get()));
  return ms * 1e-3 / reps;
}

using layerstream::InlineStream;

}  // namespace layerstream::gpubench

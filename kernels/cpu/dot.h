// Row kernels under the CPU matmul: the dot product of one weight row of any
// supported type with a float32 vector, and decoding a span of a row to
// float32 (so a row is decoded once per tile of tokens). Weights are decoded
// block by block in registers / a caller's small buffer, never whole matrices.
//
// Each function has an AVX2+FMA+F16C version (dot_avx2.cpp), for F16/Q8_0/
// Q4_0/Q4_1 an AVX-512 one (dot_avx512.cpp), and a portable one
// (dot_generic.cpp); row_kernels() picks once, at first use, by CPUID.
// All are thread-safe (pure functions of their arguments).
#pragma once

#include <cstdint>

#include "kernels/math/ggml_type.h"

namespace layerstream::kernels::cpu {

// sum_i decode(row)[i] * x[i] over n elements (n % block size == 0).
using DotFn = float (*)(const void* row, const float* x, int64_t n);
// out[0..n) = decode(row)[first .. first + n); first and n multiples of the block size.
using DecodeFn = void (*)(const void* row, int64_t first, int64_t n, float* out);

// y[r] = dot(rows + r * row_bytes, x, n) for r in [0, n_rows): several rows
// per pass over x. Same accuracy as DotFn (f32 accumulation, exact decoding).
using DotRowsFn = void (*)(const void* rows, uint64_t row_bytes, int64_t n_rows, const float* x, int64_t n, float* y);

struct RowKernels {
  DotFn dot;
  DecodeFn decode;
  DotRowsFn dot_rows = nullptr;  // null: callers loop over dot
};

// The kernels for `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_1); REQUIRES supported type.
RowKernels row_kernels(GgmlType type);
// Dense float dot product, the fastest available.
float dot_f32(const float* a, const float* b, int64_t n);
// Name of the instruction set chosen ("avx512", "avx2" or "generic"), for benchmarks and logs.
const char* row_kernels_isa();

// The two implementations, exposed so tests can check both.
namespace generic {
RowKernels row_kernels(GgmlType type);
float dot_f32(const float* a, const float* b, int64_t n);
}  // namespace generic
namespace avx2 {
bool supported();  // CPU has AVX2, FMA and F16C
RowKernels row_kernels(GgmlType type);
float dot_f32(const float* a, const float* b, int64_t n);
}  // namespace avx2
namespace avx512 {
bool supported();  // avx2::supported() and the CPU has AVX-512 F and BW
RowKernels row_kernels(GgmlType type);  // types without an AVX-512 kernel get the AVX2 ones
}  // namespace avx512

}  // namespace layerstream::kernels::cpu

// The x86-64 SIMD kernels' entry points in a build without them (not x86-64
// GCC or Clang, see x86_simd.h): no instruction set is reported as supported
// and every type goes to the next kernel down (AVX-512 -> AVX2 -> generic).
#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/kquant_dot.h"
#include "kernels/cpu/qdot.h"
#include "kernels/cpu/x86_simd.h"

#if !LS_X86_SIMD

namespace layerstream::kernels::cpu {
namespace avx2 {
bool supported() { return false; }
bool avx_vnni_supported() { return false; }
RowKernels row_kernels(GgmlType type) { return generic::row_kernels(type); }
RowKernels kquant_row_kernels(GgmlType type) { return generic::kquant_row_kernels(type); }
float dot_f32(const float* a, const float* b, int64_t n) { return generic::dot_f32(a, b, n); }
QuantKernels quant_kernels(GgmlType type) { return generic::quant_kernels(type); }
QuantKernels quant_kernels_no_vnni(GgmlType type) { return generic::quant_kernels(type); }
}  // namespace avx2

namespace avx512 {
bool supported() { return false; }
bool vnni_supported() { return false; }
RowKernels row_kernels(GgmlType type) { return avx2::row_kernels(type); }
RowKernels kquant_row_kernels(GgmlType type) { return avx2::kquant_row_kernels(type); }
QuantKernels quant_kernels(GgmlType type) { return avx2::quant_kernels(type); }
QGemmFn kquant_gemm(GgmlType) { return nullptr; }
// Never called: callers check supported() first.
void silu_mul(const float*, const float*, float*, int64_t) {}
void gelu_mul(const float*, const float*, float*, int64_t) {}
}  // namespace avx512
}  // namespace layerstream::kernels::cpu

#endif  // !LS_X86_SIMD

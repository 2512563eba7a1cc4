// The fast matmul path: activations quantised per 32-element block to int8
// (QBlock, like ggml's q8_0 with the block sum kept), weights kept in their
// GGUF blocks, and integer dot products per block (AVX-512 VNNI vpdpbusd,
// AVX-VNNI, AVX2 pmaddubsw, or portable C++), scaled to f32 per block.
//
// Accuracy: the weights are decoded exactly; each activation x[i] of a block
// with amax A is replaced by d * q[i] (d = A / 127, q = round(x[i] / d)), an
// error of at most d / 2 per element. The integer sums are exact; only the
// f32 accumulation of block results rounds. The exact path (dot.h, f32
// activations) stays for parity tests and `--exact`.
//
// Three implementations (generic, avx2, avx512), exposed so tests can check
// each; quant_kernels() picks one at run time by CPUID (or as forced).
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>

#include "kernels/math/ggml_type.h"

namespace layerstream::kernels::cpu {

constexpr int kQBlock = 32;  // activation elements per QBlock

// One quantised activation block: x[i] ~= d * qs[i], qs in [-127, 127].
struct QBlock {
  float d;
  int32_t sum;  // sum of qs: weights with an offset (Q4_0's -8, Q4_1's m) need sum(x) per block
  int8_t qs[kQBlock];
};
static_assert(sizeof(QBlock) == 40, "QBlock must be 40 bytes");

// out[0 .. n / 32) = the blocks of x[0 .. n); n % 32 == 0. Every ISA rounds
// to nearest-even after multiplying by 1/d (f32), so all give the same bytes.
using QuantizeFn = void (*)(const float* x, int64_t n, QBlock* out);

// Tile of the product: y[t * ldy + r] = row r . token t for r < n_rows and
// t < n_tok, where row r sits at rows + r * row_bytes (GGUF blocks of the
// weight type, n elements) and token t's blocks at xq + t * (n / 32).
using QGemmFn = void (*)(const void* rows, uint64_t row_bytes, int64_t n_rows, const QBlock* xq, int64_t n_tok,
                         int64_t n, float* y, int64_t ldy);

struct QuantKernels {
  QuantizeFn quantize = nullptr;
  QGemmFn gemm = nullptr;  // null: the weight type has no fast path (callers take the exact path)
  const char* isa = "";    // "avx512-vnni", "avx-vnni", "avx2", "generic"
};

// Which implementation the fast path uses. kAuto: the best this CPU has.
// Forcing one the CPU lacks falls back to the best one below it.
// kAmx: the AVX-512 kernels, and AMX tiles for the prefill GEMM of the types
// amx::gemm_fn has (matmul_fast); kAuto takes AMX where amx::supported()
// unless LAYERSTREAM_CPU_ISA caps it (avx512, avx2, generic).
enum class CpuIsa { kAuto, kAmx, kAvx512, kAvx2, kGeneric };

// A tile of a QGemmFn product: R weight rows from `rows` (row_bytes apart)
// x T tokens from xq (n / kQBlock blocks each) into y[t * ldy + r].
using QTileFn = void (*)(const uint8_t* rows, uint64_t row_bytes, const QBlock* xq, int64_t n, float* y, int64_t ldy);

// The QGemmFn of one kernel's tiles (R x T, R x 1, 1 x T and 1 x 1): R x T
// tiles, the rows and tokens left over in the smaller ones.
template <int R, int T, QTileFn kFull, QTileFn kRows, QTileFn kTokens, QTileFn kOne>
void tiled_gemm(const void* rows, uint64_t row_bytes, int64_t n_rows, const QBlock* xq, int64_t n_tok, int64_t n,
                float* y, int64_t ldy) {
  const auto* base = static_cast<const uint8_t*>(rows);
  const int64_t nq = n / kQBlock;
  int64_t r = 0;
  for (; r + R <= n_rows; r += R) {
    int64_t t = 0;
    for (; t + T <= n_tok; t += T) kFull(base + r * row_bytes, row_bytes, xq + t * nq, n, y + t * ldy + r, ldy);
    for (; t < n_tok; ++t) kRows(base + r * row_bytes, row_bytes, xq + t * nq, n, y + t * ldy + r, ldy);
  }
  for (; r < n_rows; ++r) {
    int64_t t = 0;
    for (; t + T <= n_tok; t += T) kTokens(base + r * row_bytes, row_bytes, xq + t * nq, n, y + t * ldy + r, ldy);
    for (; t < n_tok; ++t) kOne(base + r * row_bytes, row_bytes, xq + t * nq, n, y + t * ldy + r, ldy);
  }
}

// The kernels for `type` (gemm null when it has none) on `isa`.
QuantKernels quant_kernels(GgmlType type, CpuIsa isa = CpuIsa::kAuto);
// Whether `type` has a fast path (same answer on every ISA).
bool has_quant_kernels(GgmlType type);

// The ISA that kAuto resolves to on this CPU; the environment variable
// LAYERSTREAM_CPU_ISA=avx512|avx2|generic caps it (benchmarks of the
// non-AVX-512 paths on this machine).
CpuIsa auto_isa();

namespace generic {
QuantKernels quant_kernels(GgmlType type);
}  // namespace generic
namespace avx2 {
QuantKernels quant_kernels(GgmlType type);  // AVX-VNNI dot products where the CPU has them, pmaddubsw otherwise
QuantKernels quant_kernels_no_vnni(GgmlType type);  // pmaddubsw always (tests reach both)
bool avx_vnni_supported();
}  // namespace avx2
namespace avx512 {
bool vnni_supported();  // avx512::supported() plus VNNI and VL
QuantKernels quant_kernels(GgmlType type);
QGemmFn kquant_gemm(GgmlType type);  // the 256-element K-quants (Q4_K, Q5_K, Q6_K); null for others
}  // namespace avx512
namespace amx {
// AMX-TILE + AMX-INT8 + AVX-512 VNNI, the OS's tile state and Linux's
// permission to use it (asked once, per process).
bool supported();
// An AMX tile GEMM (QGemmFn contract; tokens beyond a multiple of 16 go to the
// AVX-512 VNNI kernel) for Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q5_K, Q6_K; null for other types. Call only
// where supported().
QGemmFn gemm_fn(GgmlType type);
}  // namespace amx

}  // namespace layerstream::kernels::cpu

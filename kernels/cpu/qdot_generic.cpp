// Portable fast-path kernels: the activation quantiser every ISA shares
// bit for bit, and integer block dot products in plain C++ (the reference
// the SIMD versions are tested against, and the path on CPUs without AVX2).
// Also the run-time choice between the implementations.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/qdot.h"
#include "kernels/math/fp16.h"
#include "kernels/math/kquant_types.h"
#include "kernels/math/quant_blocks.h"

namespace layerstream::kernels::cpu {
namespace generic {
namespace {

using math::kQK;
static_assert(kQK == kQBlock, "weight and activation blocks must have the same length");

void quantize(const float* x, int64_t n, QBlock* out) {
  for (int64_t b = 0; b < n / kQBlock; ++b, x += kQBlock) {
    float amax = 0;
    for (int j = 0; j < kQBlock; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    QBlock& q = out[b];
    q.d = d;
    int32_t sum = 0;
    for (int j = 0; j < kQBlock; ++j) {
      const int v = static_cast<int>(std::nearbyint(x[j] * id));  // round to nearest-even, |v| <= 127
      q.qs[j] = static_cast<int8_t>(v);
      sum += v;
    }
    q.sum = sum;
  }
}

// Per block: sum_j w_j * q_j in integers, then the block's f32 terms.
float block_dot(const math::BlockQ8_0& w, const QBlock& a) {
  int32_t s = 0;
  for (int j = 0; j < kQK; ++j) s += int32_t{w.qs[j]} * a.qs[j];
  return math::f16_to_f32(w.d) * a.d * static_cast<float>(s);
}
float block_dot(const math::BlockQ4_0& w, const QBlock& a) {
  int32_t s = 0;
  for (int j = 0; j < kQK / 2; ++j) s += (w.qs[j] & 0x0F) * a.qs[j] + (w.qs[j] >> 4) * a.qs[j + kQK / 2];
  return math::f16_to_f32(w.d) * a.d * static_cast<float>(s - 8 * a.sum);
}
float block_dot(const math::BlockQ4_1& w, const QBlock& a) {
  int32_t s = 0;
  for (int j = 0; j < kQK / 2; ++j) s += (w.qs[j] & 0x0F) * a.qs[j] + (w.qs[j] >> 4) * a.qs[j + kQK / 2];
  return math::f16_to_f32(w.d) * a.d * static_cast<float>(s) + math::f16_to_f32(w.m) * a.d * static_cast<float>(a.sum);
}

// The Q5, K-quant and IQ4 types through their shared form (kquant_blocks.h):
// per 32-element sub-block int8 codes with a scale and an offset per half,
//   sum_j x_j w_j = d_a * sum_h (scale_h * sum_{j in h} q_j a_j + offset_h * sum_{j in h} a_j).
template <typename Block>
float kblock_dot(const Block& w, const QBlock* a) {
  float sum = 0;
  for (int s = 0; s < Block::kElems / kQK; ++s) {
    int8_t q[kQK];
    float scale[2], offset[2];
    math::unpack_sub(w, s, q, scale, offset);
    float sub = 0;
    for (int h = 0; h < 2; ++h) {
      int32_t dot = 0, sa = 0;
      for (int j = 16 * h; j < 16 * h + 16; ++j) {
        dot += int32_t{q[j]} * a[s].qs[j];
        sa += a[s].qs[j];
      }
      sub += scale[h] * static_cast<float>(dot) + offset[h] * static_cast<float>(sa);
    }
    sum += a[s].d * sub;
  }
  return sum;
}

template <typename Block>
constexpr int64_t block_elems() {
  if constexpr (requires { Block::kElems; }) {
    return Block::kElems;
  } else {
    return kQK;
  }
}

template <typename Block>
void gemm(const void* rows, uint64_t row_bytes, int64_t n_rows, const QBlock* xq, int64_t n_tok, int64_t n, float* y,
          int64_t ldy) {
  constexpr int64_t kElems = block_elems<Block>(), kSubs = kElems / kQK;
  const int64_t nb = n / kElems;
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* w = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(rows) + r * row_bytes);
    for (int64_t t = 0; t < n_tok; ++t) {
      const QBlock* a = xq + t * (n / kQK);
      float sum = 0;
      for (int64_t b = 0; b < nb; ++b) {
        Block blk;
        std::memcpy(&blk, w + b, sizeof(Block));  // blocks are 2-byte aligned at best
        if constexpr (kElems == kQK && !requires { Block::kElems; }) {
          sum += block_dot(blk, a[b]);
        } else {
          sum += kblock_dot(blk, a + b * kSubs);
        }
      }
      y[t * ldy + r] = sum;
    }
  }
}

}  // namespace

QuantKernels quant_kernels(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return {quantize, gemm<math::BlockQ8_0>, "generic"};
    case GgmlType::Q4_0: return {quantize, gemm<math::BlockQ4_0>, "generic"};
    case GgmlType::Q4_1: return {quantize, gemm<math::BlockQ4_1>, "generic"};
    default: {
      QuantKernels k{quantize, nullptr, "generic"};
      math::visit_kquant_type(type, [&](auto tag) { k.gemm = gemm<typename decltype(tag)::type>; });
      return k;
    }
  }
}

}  // namespace generic

bool has_quant_kernels(GgmlType type) { return generic::quant_kernels(type).gemm != nullptr; }

CpuIsa auto_isa() {
  static const CpuIsa isa = [] {
    CpuIsa best = avx512::vnni_supported() ? CpuIsa::kAvx512 : avx2::supported() ? CpuIsa::kAvx2 : CpuIsa::kGeneric;
    if (const char* env = std::getenv("LAYERSTREAM_CPU_ISA")) {
      const std::string_view v(env);
      if (v == "avx2" && best == CpuIsa::kAvx512) best = CpuIsa::kAvx2;
      if (v == "generic") best = CpuIsa::kGeneric;
    }
    return best;
  }();
  return isa;
}

QuantKernels quant_kernels(GgmlType type, CpuIsa isa) {
  if (isa == CpuIsa::kAuto) isa = auto_isa();
  if (isa == CpuIsa::kAmx) isa = CpuIsa::kAvx512;  // AMX is a prefill GEMM driver over these (matmul_fast)
  static const bool has_avx2 = avx2::supported();  // once: CPUID is slow in a VM
  if (isa == CpuIsa::kAvx512 && !avx512::vnni_supported()) isa = CpuIsa::kAvx2;
  if (isa == CpuIsa::kAvx2 && !has_avx2) isa = CpuIsa::kGeneric;
  switch (isa) {
    case CpuIsa::kAvx512: return avx512::quant_kernels(type);
    case CpuIsa::kAvx2: return avx2::quant_kernels(type);
    default: return generic::quant_kernels(type);
  }
}

}  // namespace layerstream::kernels::cpu

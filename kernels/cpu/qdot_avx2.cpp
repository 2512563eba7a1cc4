// AVX2 fast-path kernels, built twice from qdot_avx2.inc (Q8_0, Q4_0, Q4_1)
// and qdot_kquant_avx2.inc (Q5_0/Q5_1, Q2_K-Q6_K, IQ4_NL/IQ4_XS, MXFP4): plain AVX2
// (pmaddubsw) and AVX-VNNI (vpdpbusd on 256-bit vectors, CPUs with AVX-VNNI
// but without AVX-512, and this path when AVX-512 is switched off). Each
// function carries its target attribute and is only called after CPUID
// confirmed the instructions. Activations are quantised by the generic
// quantiser (it is not where the time goes at 32 bytes per block).
#include "kernels/cpu/dot.h"
#include "kernels/cpu/kquant_scales.h"
#include "kernels/cpu/qdot.h"
#include "kernels/cpu/x86_simd.h"
#include "kernels/math/kquant_blocks.h"
#include "kernels/math/quant_blocks.h"

#if LS_X86_SIMD

namespace layerstream::kernels::cpu::avx2 {

namespace plain {
namespace {
#define LS_QTARGET __attribute__((target("avx2,fma,f16c")))
#define LS_QVNNI 0
#include "kernels/cpu/qdot_avx2.inc"
#include "kernels/cpu/qdot_kquant_avx2.inc"
#undef LS_QTARGET
#undef LS_QVNNI
}  // namespace
}  // namespace plain

namespace vnni {
namespace {
#define LS_QTARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define LS_QVNNI 1
#include "kernels/cpu/qdot_avx2.inc"
#include "kernels/cpu/qdot_kquant_avx2.inc"
#undef LS_QTARGET
#undef LS_QVNNI
}  // namespace
}  // namespace vnni

bool avx_vnni_supported() {
  static const bool yes = [] {  // once: CPUID is slow in a VM
    // CPUID leaf 7 sub-leaf 1, EAX bit 4 (clang before 16 rejects
    // __builtin_cpu_supports("avxvnni")).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return supported() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4)) != 0;
  }();
  return yes;
}

QuantKernels quant_kernels(GgmlType type) {
  return avx_vnni_supported() ? vnni::kernels_for(type, "avx-vnni") : plain::kernels_for(type, "avx2");
}

// The pmaddubsw kernels even where AVX-VNNI exists, so tests reach both.
QuantKernels quant_kernels_no_vnni(GgmlType type) { return plain::kernels_for(type, "avx2"); }

}  // namespace layerstream::kernels::cpu::avx2

#endif  // LS_X86_SIMD

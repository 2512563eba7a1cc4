// What every x86-64 SIMD kernel file starts with. LS_X86_SIMD says whether
// this compiler builds them (x86-64 GCC or Clang: intrinsics and per-function
// target attributes); without it, cpu_fallback.cpp stands in for their entry
// points. Each target macro names the instruction sets of one kind of kernel;
// such a function is only called after the matching supported() check.
#pragma once

#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#define LS_X86_SIMD 1
#if !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge
// source and then warn that it is uninitialised (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cpuid.h>
#include <immintrin.h>

#define LS_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LS_AVX512F __attribute__((target("avx512f,avx2,fma")))
#define LS_AVX512 __attribute__((target("avx512f,avx512bw,avx2,fma,f16c")))
#define LS_VNNI512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

// The lanes of a 16-float vector that hold the last `left` elements of a row
// (all 16 when left >= 16): masked loads read nothing past the row.
namespace layerstream::kernels::cpu {
LS_AVX512F inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}
}  // namespace layerstream::kernels::cpu
#else
#define LS_X86_SIMD 0
#endif

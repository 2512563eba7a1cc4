// LS_HD marks functions compiled for both the CPU and the GPU, so the CPU
// kernels and tests exercise exactly the math the CUDA kernels run.
#pragma once

#if defined(__CUDACC__)
#define LS_HD __host__ __device__ __forceinline__
#else
#define LS_HD inline
#endif

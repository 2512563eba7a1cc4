// CUDA matmul y[t][o] = w[o] . x[t] (shapes in kernels/kernels.h).
//  - n_tokens <= kMatvecMaxTokens, any weight type: matvec_kernel, one warp
//    per output row, weights decoded in registers with the shared math, each
//    weight element read once for all tokens of the batch. Q8_0/Q4_0/Q4_1
//    with 16-byte aligned x take the coalesced matvec_quarter.cu instead.
//  - larger batches: cuBLAS GemmEx. F32 weights: 32F x 32F (no TF32).
//    F16/BF16 weights: x converted to the weight's type in scratch.
//    Quantised weights: dequantised to F16 in scratch, x to F16.
//    x goes to F16 row by row scaled by a power of two (math/f16_scaling.h)
//    and the GEMM result is scaled back, so |x| >= 65520 does not become inf.
//    Without enough scratch the matvec kernel serves (correct, slower).
// Accuracy: the matvec kernel and the F32 GEMM accumulate in f32 on exactly
// decoded weights; the converted paths add the rounding of x (and of the
// dequantised weight) to 16 bits.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kquant.h"
#include "kernels/cuda/launchers.h"
#include "kernels/math/f16_scaling.h"
#include "runtime/core/status_macros.h"

namespace layerstream::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxTok = static_cast<int>(kMatvecMaxTokens);

// Weight element (o, i) -> f16 bits, for the cuBLAS path.
template <typename Block>
__global__ void dequant_f16_kernel(const void* w, int64_t n_out, int64_t n_in, int64_t row_bytes, uint16_t* out) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_out * n_in) return;
  const int64_t o = idx / n_in, i = idx % n_in;
  const void* row = static_cast<const uint8_t*>(w) + o * row_bytes;
  out[idx] = math::f32_to_f16(block_elem<Block>(row, i / math::kQK, static_cast<int>(i % math::kQK)));
}

__global__ void convert_x_bf16_kernel(const float* x, int64_t n, uint16_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = math::f32_to_bf16(x[i]);
}

// One block (256 threads) per token row: the row's largest |x| gives the
// exponent e (math::f16_row_exponent), stored in exps[t]; the row is written
// as f16(x * 2^-e).
constexpr int kScaleThreads = 256;
__global__ void convert_x_f16_scaled_kernel(const float* x, int64_t n_in, uint16_t* out, int* exps) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n_in;
  uint16_t* orow = out + static_cast<int64_t>(blockIdx.x) * n_in;
  float m = 0.0f;
  for (int64_t i = threadIdx.x; i < n_in; i += blockDim.x) m = fmaxf(m, fabsf(xr[i]));  // fmaxf drops NaN
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  __shared__ float partial[kScaleThreads / 32];
  __shared__ int e_shared;
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float row_max = partial[0];
    for (int w = 1; w < kScaleThreads / 32; ++w) row_max = fmaxf(row_max, partial[w]);
    e_shared = math::f16_row_exponent(row_max);
    exps[blockIdx.x] = e_shared;
  }
  __syncthreads();
  const int e = e_shared;
  for (int64_t i = threadIdx.x; i < n_in; i += blockDim.x) orow[i] = math::f32_to_f16(ldexpf(xr[i], -e));
}

// y[t][o] *= 2^exps[t], undoing the scaling of x.
__global__ void unscale_y_kernel(float* y, int64_t n_out, int64_t n, const int* exps) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = ldexpf(y[i], exps[i / n_out]);
}

template <typename Decoder>
MatvecKernel matvec_of() {
  return matvec_kernel<Decoder, kWarpsPerBlock, kMaxTok>;
}

// The lane-per-block kernel of a dense or Q8_0/Q4_0/Q4_1 weight (the
// element-wise dense decode, whole blocks otherwise); null for others.
MatvecKernel matvec_kernel_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return matvec_of<DenseDecoder<0>>();
    case GgmlType::F16: return matvec_of<DenseDecoder<1>>();
    case GgmlType::BF16: return matvec_of<DenseDecoder<30>>();
    case GgmlType::Q8_0: return matvec_of<WholeBlockDecoder<math::BlockQ8_0>>();
    case GgmlType::Q4_0: return matvec_of<WholeBlockDecoder<math::BlockQ4_0>>();
    case GgmlType::Q4_1: return matvec_of<WholeBlockDecoder<math::BlockQ4_1>>();
    default: return nullptr;
  }
}

Status launch_matvec(const MatmulParams& p, int64_t first_token, int n_tok, cudaStream_t s) {
  const MatvecKernel kernel = matvec_kernel_for(p.w_type);
  if (!kernel) {
    if (is_kquant_type(p.w_type)) return launch_kquant_matvec(p, first_token, n_tok, s);  // kquant.cu
    return Status::Unsupported("cuda matmul: unsupported weight type");
  }
  launch_matvec_kernel(kernel, kWarpsPerBlock, p, first_token, n_tok, s);
  LS_CUDA_CHECK_LAUNCH("matvec");
  return Status::OK();
}

bool is_quantised(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || is_kquant_type(t);
}

uint64_t align256(uint64_t b) { return (b + 255) & ~uint64_t{255}; }

// y^T (n_out x n_tok, column-major) = W^T^T x: W is column-major n_in x n_out.
Status gemm(cublasHandle_t h, cudaStream_t s, const void* w, cudaDataType wt, const void* x, cudaDataType xt,
            float* y, int64_t n_out, int64_t n_in, int64_t n_tok) {
  const float alpha = 1.0f, beta = 0.0f;
  LS_CUBLAS_RETURN_IF_ERROR(cublasSetStream(h, s));
  LS_CUBLAS_RETURN_IF_ERROR(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_out),
                                         static_cast<int>(n_tok), static_cast<int>(n_in), &alpha, w, wt,
                                         static_cast<int>(n_in), x, xt, static_cast<int>(n_in), &beta, y, CUDA_R_32F,
                                         static_cast<int>(n_out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return Status::OK();
}

}  // namespace

// Scratch: [x in 16 bits][row exponents of x][dequantised weight, quantised types only].
uint64_t matmul_scratch_bytes(GgmlType w_type, int64_t n_out, int64_t n_in, int64_t n_tokens) {
  if (n_tokens <= kMatvecMaxTokens || w_type == GgmlType::F32) return 0;
  const uint64_t x16 = align256(static_cast<uint64_t>(n_tokens) * n_in * 2);
  const uint64_t exps = align256(static_cast<uint64_t>(n_tokens) * sizeof(int));
  if (!is_quantised(w_type)) return x16 + exps;
  return x16 + exps + align256(static_cast<uint64_t>(n_out) * n_in * 2);
}

Status launch_matmul(const MatmulParams& p, cublasHandle_t cublas, cudaStream_t s) {
  const uint64_t need = matmul_scratch_bytes(p.w_type, p.n_out, p.n_in, p.n_tokens);
  const bool big = p.n_tokens > kMatvecMaxTokens && p.n_out <= INT32_MAX && p.n_in <= INT32_MAX &&
                   p.n_tokens <= INT32_MAX;
  if (big && p.w_type == GgmlType::F32) {
    return gemm(cublas, s, p.w, CUDA_R_32F, p.x, CUDA_R_32F, p.y, p.n_out, p.n_in, p.n_tokens);
  }
  if (big && p.scratch && p.scratch_bytes >= need) {
    auto* x16 = static_cast<uint16_t*>(p.scratch);
    const bool bf16 = p.w_type == GgmlType::BF16;
    const int64_t nx = p.n_tokens * p.n_in;
    auto* exps = reinterpret_cast<int*>(static_cast<uint8_t*>(p.scratch) + align256(nx * 2));
    if (bf16) {
      convert_x_bf16_kernel<<<grid_for(nx, 256), 256, 0, s>>>(p.x, nx, x16);
      LS_CUDA_CHECK_LAUNCH("convert_x_bf16");
    } else {
      convert_x_f16_scaled_kernel<<<static_cast<unsigned>(p.n_tokens), kScaleThreads, 0, s>>>(p.x, p.n_in, x16, exps);
      LS_CUDA_CHECK_LAUNCH("convert_x_f16_scaled");
    }
    const void* w = p.w;
    if (is_quantised(p.w_type)) {
      auto* w16 = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(p.scratch) + align256(nx * 2) +
                                              align256(static_cast<uint64_t>(p.n_tokens) * sizeof(int)));
      const int64_t rb = static_cast<int64_t>(ggml_row_bytes(ggml_type_traits(p.w_type), p.n_in));
      const int64_t nw = p.n_out * p.n_in;
      switch (p.w_type) {
        case GgmlType::Q8_0:
          dequant_f16_kernel<math::BlockQ8_0><<<grid_for(nw, 256), 256, 0, s>>>(p.w, p.n_out, p.n_in, rb, w16);
          break;
        case GgmlType::Q4_0:
          dequant_f16_kernel<math::BlockQ4_0><<<grid_for(nw, 256), 256, 0, s>>>(p.w, p.n_out, p.n_in, rb, w16);
          break;
        case GgmlType::Q4_1:
          dequant_f16_kernel<math::BlockQ4_1><<<grid_for(nw, 256), 256, 0, s>>>(p.w, p.n_out, p.n_in, rb, w16);
          break;
        default:
          LS_RETURN_IF_ERROR(launch_kquant_dequant_16(p.w, p.w_type, p.n_out, p.n_in, /*to_bf16=*/false, w16, s));
          break;
      }
      LS_CUDA_CHECK_LAUNCH("dequant_f16");
      w = w16;
    }
    const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    LS_RETURN_IF_ERROR(gemm(cublas, s, w, t, x16, t, p.y, p.n_out, p.n_in, p.n_tokens));
    if (!bf16) {
      const int64_t ny = p.n_out * p.n_tokens;
      unscale_y_kernel<<<grid_for(ny, 256), 256, 0, s>>>(p.y, p.n_out, ny, exps);
      LS_CUDA_CHECK_LAUNCH("unscale_y");
    }
    return Status::OK();
  }
  const bool quarter = matvec_quarter_applies(p.w_type, p.x);  // coalesced Q8_0/Q4_0/Q4_1 (matvec_quarter.cu)
  for (int64_t t0 = 0; t0 < p.n_tokens; t0 += kMatvecMaxTokens) {
    const int n = static_cast<int>(std::min<int64_t>(kMatvecMaxTokens, p.n_tokens - t0));
    LS_RETURN_IF_ERROR(quarter ? launch_matvec_quarter(p, t0, n, s) : launch_matvec(p, t0, n, s));
  }
  return Status::OK();
}

Status launch_matvec_lane_per_block(const MatmulParams& p, cudaStream_t s) {
  for (int64_t t0 = 0; t0 < p.n_tokens; t0 += kMatvecMaxTokens) {
    const int n = static_cast<int>(std::min<int64_t>(kMatvecMaxTokens, p.n_tokens - t0));
    LS_RETURN_IF_ERROR(launch_matvec(p, t0, n, s));
  }
  return Status::OK();
}

}  // namespace layerstream::kernels::cuda

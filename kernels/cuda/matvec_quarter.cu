// Coalesced matvec for Q8_0 / Q4_0 / Q4_1 weights (issue 20, defect 6), for
// batches of up to kMatvecMaxTokens tokens. One warp per output row; four
// lanes per block (math/quant_quarter.h), so each step of a warp covers 8
// consecutive blocks and 256 consecutive activations, the activations read as
// float4. Each lane decodes its 8 weights once and uses them for every token.
// Needs 16-byte aligned activations (launch_matvec falls back to the
// lane-per-block kernel otherwise).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launchers.h"
#include "kernels/math/quant_quarter.h"

namespace layerstream::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxTok = static_cast<int>(kMatvecMaxTokens);
constexpr int kBlocksPerStep = 8;  // 32 lanes / 4 lanes per block

template <typename Block>
__global__ void matvec_quarter_kernel(const void* w, int64_t n_out, int64_t n_in, int64_t row_bytes, const float* x,
                                      int n_tok, float* y) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (o >= n_out) return;
  const int lane = threadIdx.x & 31, k = lane & 3;
  const Block* row = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + o * row_bytes);
  const int64_t n_blocks = n_in / math::kQK;
  const int r0 = math::quarter_x_run(static_cast<const Block*>(nullptr), k, 0);
  const int r1 = math::quarter_x_run(static_cast<const Block*>(nullptr), k, 1);
  float acc[kMaxTok] = {};
  for (int64_t b = lane >> 2; b < n_blocks; b += kBlocksPerStep) {
    float wq[math::kQuarterElems];
    math::decode_quarter(row[b], k, wq);
#pragma unroll
    for (int t = 0; t < kMaxTok; ++t) {
      if (t < n_tok) {
        const float* xb = x + t * n_in + b * math::kQK;
        const float4 a = *reinterpret_cast<const float4*>(xb + r0);
        const float4 c = *reinterpret_cast<const float4*>(xb + r1);
        acc[t] += wq[0] * a.x + wq[1] * a.y + wq[2] * a.z + wq[3] * a.w + wq[4] * c.x + wq[5] * c.y + wq[6] * c.z +
                  wq[7] * c.w;
      }
    }
  }
  store_warp_sums(acc, n_tok, y, n_out, o);
}

MatvecKernel quarter_kernel_for(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return matvec_quarter_kernel<math::BlockQ8_0>;
    case GgmlType::Q4_0: return matvec_quarter_kernel<math::BlockQ4_0>;
    case GgmlType::Q4_1: return matvec_quarter_kernel<math::BlockQ4_1>;
    default: return nullptr;
  }
}

}  // namespace

bool matvec_quarter_applies(GgmlType t, const float* x) {
  return quarter_kernel_for(t) != nullptr && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

Status launch_matvec_quarter(const MatmulParams& p, int64_t first_token, int n_tok, cudaStream_t s) {
  const MatvecKernel kernel = quarter_kernel_for(p.w_type);
  if (!kernel) return Status::Unsupported("cuda matvec_quarter: not a Q8_0/Q4_0/Q4_1 weight");
  launch_matvec_kernel(kernel, kWarps, p, first_token, n_tok, s);
  LS_CUDA_CHECK_LAUNCH("matvec_quarter");
  return Status::OK();
}

}  // namespace layerstream::kernels::cuda

// CUDA grouped-query attention over the KV cache (layout in kernels/kernels.h).
// store_kv_kernel writes the new K/V rows; attention_kernel runs one warp per
// (head, token): lanes own head dims lane, lane+32, ...; scores are reduced
// across the warp and folded into the shared running softmax. Simple and
// exact; long contexts would want a split-K (flash-decoding) variant.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launchers.h"
#include "kernels/math/softmax.h"

namespace layerstream::kernels::cuda {
namespace {

constexpr int kMaxPerLane = static_cast<int>(kMaxHeadDim / 32);

__global__ void store_kv_kernel(const float* src, void* cache, bool f16, int64_t first, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (f16) {
    static_cast<uint16_t*>(cache)[first + i] = math::f32_to_f16(src[i]);
  } else {
    static_cast<float*>(cache)[first + i] = src[i];
  }
}

__device__ __forceinline__ float cache_elem(const void* c, bool f16, int64_t i) {
  return f16 ? math::f16_to_f32(static_cast<const uint16_t*>(c)[i]) : static_cast<const float*>(c)[i];
}

// Grid: x = head, y = min(n_tokens, kMaxGridY); each block walks the tokens
// t = blockIdx.y, blockIdx.y + gridDim.y, ... (grid y is limited to 65535).
constexpr int64_t kMaxGridY = 65535;

__device__ void attention_one(const AttentionParams& p, bool f16, float scale, int64_t h, int64_t t);

__global__ void attention_kernel(AttentionParams p, bool f16, float scale) {
  for (int64_t t = blockIdx.y; t < p.n_tokens; t += gridDim.y) attention_one(p, f16, scale, blockIdx.x, t);
}

// One warp: query head h of token t.
__device__ void attention_one(const AttentionParams& p, bool f16, float scale, int64_t h, int64_t t) {
  const int lane = threadIdx.x;
  const int64_t kvh = h / (p.n_head / p.n_kv_head);
  const int64_t kv_row = p.n_kv_head * p.head_dim;
  const float* q = p.q + (t * p.n_head + h) * p.head_dim;
  float qr[kMaxPerLane], acc[kMaxPerLane];
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    qr[j] = d < p.head_dim ? q[d] : 0.0f;
    acc[j] = 0.0f;
  }
  math::OnlineSoftmax sm;
  const int64_t last = p.start_pos + t;
  const int64_t first = p.window > 0 && last >= p.window ? last - p.window + 1 : 0;
  for (int64_t pos = first; pos <= last; ++pos) {
    const int64_t base = pos * kv_row + kvh * p.head_dim;
    float s = 0;
    for (int j = 0; j < kMaxPerLane; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < p.head_dim) s += qr[j] * cache_elem(p.k_cache, f16, base + d);
    }
    s = warp_sum(s) * scale;
    float rescale, weight;
    sm.push(s, rescale, weight);
    for (int j = 0; j < kMaxPerLane; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < p.head_dim) acc[j] = acc[j] * rescale + weight * cache_elem(p.v_cache, f16, base + d);
    }
  }
  if (p.sinks) {  // one more logit in the denominator, weighing no value row
    float rescale, weight;
    sm.push(p.sinks[h], rescale, weight);
    for (int j = 0; j < kMaxPerLane; ++j) acc[j] *= rescale;
  }
  float* out = p.out + (t * p.n_head + h) * p.head_dim;
  const float inv_l = 1.0f / sm.l;
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    if (d < p.head_dim) out[d] = acc[j] * inv_l;
  }
}

}  // namespace

Status launch_attention(const AttentionParams& p, cudaStream_t s) {
  const bool f16 = p.kv_type == GgmlType::F16;
  const int64_t kv_row = p.n_kv_head * p.head_dim;
  const int64_t n_new = p.n_tokens * kv_row;
  if (p.k_new) {
    store_kv_kernel<<<grid_for(n_new, 256), 256, 0, s>>>(p.k_new, p.k_cache, f16, p.start_pos * kv_row, n_new);
    LS_CUDA_CHECK_LAUNCH("store_kv(k)");
  }
  if (p.v_new) {
    store_kv_kernel<<<grid_for(n_new, 256), 256, 0, s>>>(p.v_new, p.v_cache, f16, p.start_pos * kv_row, n_new);
    LS_CUDA_CHECK_LAUNCH("store_kv(v)");
  }
  const float scale = p.scale != 0 ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  const dim3 grid(static_cast<unsigned>(p.n_head), static_cast<unsigned>(std::min(p.n_tokens, kMaxGridY)));
  attention_kernel<<<grid, 32, 0, s>>>(p, f16, scale);
  LS_CUDA_CHECK_LAUNCH("attention");
  return Status::OK();
}

}  // namespace layerstream::kernels::cuda

// CPU grouped-query attention over the KV cache (layout in kernels/kernels.h):
// store the new K/V rows, then one running softmax per (token, head).
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/ops.h"
#include "kernels/math/fp16.h"
#include "kernels/math/softmax.h"

namespace layerstream::kernels::cpu {
namespace {

void store_rows(const float* src, void* cache, GgmlType type, int64_t first_row, int64_t n_elems) {
  if (type == GgmlType::F32) {
    std::memcpy(static_cast<float*>(cache) + first_row, src, n_elems * sizeof(float));
  } else {
    uint16_t* dst = static_cast<uint16_t*>(cache) + first_row;
    for (int64_t i = 0; i < n_elems; ++i) dst[i] = math::f32_to_f16(src[i]);
  }
}

}  // namespace

void attention(const AttentionParams& p, ThreadPool* pool) {
  const int64_t kv_row = p.n_kv_head * p.head_dim;  // elements per cache position
  if (p.k_new) store_rows(p.k_new, p.k_cache, p.kv_type, p.start_pos * kv_row, p.n_tokens * kv_row);
  if (p.v_new) store_rows(p.v_new, p.v_cache, p.kv_type, p.start_pos * kv_row, p.n_tokens * kv_row);

  const RowKernels k = row_kernels(p.kv_type);
  const uint64_t elem_bytes = p.kv_type == GgmlType::F32 ? 4 : 2;
  const auto* kc = static_cast<const uint8_t*>(p.k_cache);
  const auto* vc = static_cast<const uint8_t*>(p.v_cache);
  const float scale = p.scale != 0 ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  const int64_t group = p.n_head / p.n_kv_head;

  parallel_rows(pool, p.n_tokens * p.n_head, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(p.head_dim), v(p.head_dim);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / p.n_head, h = item % p.n_head, kvh = h / group;
      const float* q = p.q + item * p.head_dim;
      std::fill(acc.begin(), acc.end(), 0.0f);
      math::OnlineSoftmax sm;
      const int64_t last = p.start_pos + t;
      const int64_t first = p.window > 0 && last >= p.window ? last - p.window + 1 : 0;
      for (int64_t pos = first; pos <= last; ++pos) {
        const uint64_t off = static_cast<uint64_t>(pos * kv_row + kvh * p.head_dim) * elem_bytes;
        const float s = scale * k.dot(kc + off, q, p.head_dim);
        float rescale, weight;
        sm.push(s, rescale, weight);
        k.decode(vc + off, 0, p.head_dim, v.data());
        for (int64_t d = 0; d < p.head_dim; ++d) acc[d] = acc[d] * rescale + weight * v[d];
      }
      float* out = p.out + item * p.head_dim;
      const float inv_l = 1.0f / sm.l;
      for (int64_t d = 0; d < p.head_dim; ++d) out[d] = acc[d] * inv_l;
    }
  });
}

}  // namespace layerstream::kernels::cpu

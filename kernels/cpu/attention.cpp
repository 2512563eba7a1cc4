// CPU grouped-query attention over the KV cache (layout in kernels/kernels.h):
// store the new K/V rows, then either (one token, long context) the split
// over position chunks of attention_split.cpp, or for each (token, KV head)
// the scores of its query heads, their softmax, and the weighted sum of V
// rows. A token attending to more than kSplitPositions positions takes the
// split's chunked softmax on either path, so its output does not depend on
// how many tokens its pass holds.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/attention_split.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/ops.h"
#include "kernels/math/fp16.h"

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

struct ChunkScratch {
  std::vector<float> scores, m, l, acc;
};

// The output of the `group` query heads of KV head kvh (q: theirs) over
// positions [first, first + n_pos), n_pos > kSplitPositions, chunk by chunk:
// the bits attention_split gives a one-token pass.
void attend_in_chunks(const AttentionParams& p, int64_t kvh, const float* q, int64_t first, int64_t n_pos, float scale,
                      ChunkScratch& s, float* out) {
  const int64_t hd = p.head_dim, group = p.n_head / p.n_kv_head;
  const int64_t n_chunks = (n_pos + kSplitPositions - 1) / kSplitPositions;
  s.scores.resize(group * kSplitPositions);
  s.m.resize(n_chunks * group);
  s.l.resize(n_chunks * group);
  s.acc.resize(n_chunks * group * hd);
  for (int64_t c = 0; c < n_chunks; ++c)
    attend_chunk(p, kvh, q, first + c * kSplitPositions, std::min(kSplitPositions, n_pos - c * kSplitPositions), scale,
                 s.scores.data(), &s.m[c * group], &s.l[c * group], &s.acc[c * group * hd]);
  for (int64_t g = 0; g < group; ++g) {
    const float* sink = p.sinks ? p.sinks + kvh * group + g : nullptr;
    merge_chunks(n_chunks, &s.m[g], &s.l[g], &s.acc[g * hd], group, hd, sink, out + g * hd);
  }
}

}  // namespace

void attention(const AttentionParams& p, ThreadPool* pool) {
  const int64_t kv_row = p.n_kv_head * p.head_dim;  // elements per cache position
  if (p.k_new) store_rows(p.k_new, p.k_cache, p.kv_type, p.start_pos * kv_row, p.n_tokens * kv_row);
  if (p.v_new) store_rows(p.v_new, p.v_cache, p.kv_type, p.start_pos * kv_row, p.n_tokens * kv_row);
  const float scale = p.scale != 0 ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  if (p.n_tokens == 1) {  // decode over a long context: split over positions (attention_split.h)
    const int64_t last = p.start_pos;
    const int64_t first = p.window > 0 && last >= p.window ? last - p.window + 1 : 0;
    if (use_attention_split(p, last - first + 1)) return attention_split(p, pool, first, last - first + 1, scale);
  }
  attention_by_heads(p, pool, scale);
}

void attention_by_heads(const AttentionParams& p, ThreadPool* pool, float scale) {
  const int64_t kv_row = p.n_kv_head * p.head_dim;  // elements per cache position
  const bool f32 = p.kv_type == GgmlType::F32;  // else F16
  const int64_t group = p.n_head / p.n_kv_head;
  const int64_t hd = p.head_dim;

  // One item per (token, KV head): the `group` query heads sharing that KV
  // head go together, so each cached K and V row is read once per item
  // rather than once per query head (the cache is most of the bytes a long
  // context decode reads). Two passes over the positions: scores, then the
  // softmax-weighted sum of V rows.
  // Items of a short context are a few microseconds of work: keep ~64K
  // multiply-adds per chunk so they stay on the calling thread.
  const int64_t item_work = (p.start_pos + p.n_tokens) * group * hd * 2;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(item_work, 1));
  parallel_rows(pool, p.n_tokens * p.n_kv_head, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, acc(group * hd);
    ChunkScratch chunks;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / p.n_kv_head, kvh = item % p.n_kv_head;
      const int64_t last = p.start_pos + t;
      const int64_t first = p.window > 0 && last >= p.window ? last - p.window + 1 : 0;  // sliding window
      const int64_t n_pos = last - first + 1;
      const float* q = p.q + (t * p.n_head + kvh * group) * hd;  // the group's query heads, contiguous
      float* out = p.out + (t * p.n_head + kvh * group) * hd;
      if (n_pos > kSplitPositions) {  // in chunks, as a one-token pass computes it (attention_split.h)
        attend_in_chunks(p, kvh, q, first, n_pos, scale, chunks, out);
        continue;
      }
      const uint64_t row0 = static_cast<uint64_t>(first * kv_row + kvh * hd);  // element of (first, kvh, 0)
      scores.resize(group * n_pos);
      if (f32) {  // F16 rows are converted in registers by the row loops
        attention_scores(static_cast<const float*>(p.k_cache) + row0, kv_row, n_pos, q, group, hd, scale,
                         scores.data());
      } else {
        attention_scores(static_cast<const uint16_t*>(p.k_cache) + row0, kv_row, n_pos, q, group, hd, scale,
                         scores.data());
      }
      for (int64_t g = 0; g < group; ++g) {  // softmax in place (a sink: one more logit in the denominator)
        float* sg = scores.data() + g * n_pos;
        const float* sink = p.sinks ? p.sinks + kvh * group + g : nullptr;
        float m = sink ? *sink : -INFINITY, l = 0;
        for (int64_t i = 0; i < n_pos; ++i) m = std::max(m, sg[i]);
        for (int64_t i = 0; i < n_pos; ++i) l += (sg[i] = std::exp(sg[i] - m));
        if (sink) l += std::exp(*sink - m);
        const float inv_l = 1.0f / l;
        for (int64_t i = 0; i < n_pos; ++i) sg[i] *= inv_l;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      if (f32) {
        attention_weighted_sum(static_cast<const float*>(p.v_cache) + row0, kv_row, n_pos, scores.data(), group, hd,
                               acc.data());
      } else {
        attention_weighted_sum(static_cast<const uint16_t*>(p.v_cache) + row0, kv_row, n_pos, scores.data(), group,
                               hd, acc.data());
      }
      std::copy(acc.begin(), acc.end(), out);
    }
  });
}

}  // namespace layerstream::kernels::cpu

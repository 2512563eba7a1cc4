#include "kernels/cpu/attention_split.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/ops.h"

namespace layerstream::kernels::cpu {

void attend_chunk(const AttentionParams& p, int64_t kvh, const float* q, int64_t i0, int64_t len, float scale,
                  float* scores, float* m, float* l, float* acc) {
  const int64_t kv_row = p.n_kv_head * p.head_dim;  // elements per cache position
  const int64_t hd = p.head_dim, group = p.n_head / p.n_kv_head;
  const int64_t row0 = i0 * kv_row + kvh * hd;  // element of (i0, kvh, 0)
  // Rows of positions i0 .. i0 + len, kv_row elements apart; F16 rows are
  // converted in registers by the row loops.
  if (p.kv_type == GgmlType::F32) {
    attention_scores(static_cast<const float*>(p.k_cache) + row0, kv_row, len, q, group, hd, scale, scores);
  } else {
    attention_scores(static_cast<const uint16_t*>(p.k_cache) + row0, kv_row, len, q, group, hd, scale, scores);
  }
  for (int64_t g = 0; g < group; ++g) {  // partial softmax: exp(s - m), unnormalised
    float* sg = scores + g * len;
    float mg = -INFINITY, lg = 0;
    for (int64_t i = 0; i < len; ++i) mg = std::max(mg, sg[i]);
    for (int64_t i = 0; i < len; ++i) lg += (sg[i] = std::exp(sg[i] - mg));
    m[g] = mg;
    l[g] = lg;
  }
  std::fill(acc, acc + group * hd, 0.0f);
  if (p.kv_type == GgmlType::F32) {
    attention_weighted_sum(static_cast<const float*>(p.v_cache) + row0, kv_row, len, scores, group, hd, acc);
  } else {
    attention_weighted_sum(static_cast<const uint16_t*>(p.v_cache) + row0, kv_row, len, scores, group, hd, acc);
  }
}

void merge_chunks(int64_t n_chunks, const float* m, const float* l, const float* acc, int64_t stride, int64_t hd,
                  const float* sink, float* out) {
  float mx = sink ? *sink : -INFINITY;
  for (int64_t c = 0; c < n_chunks; ++c) mx = std::max(mx, m[c * stride]);
  float sum = sink ? std::exp(*sink - mx) : 0.0f;  // the sink's share of the denominator
  std::fill(out, out + hd, 0.0f);
  for (int64_t c = 0; c < n_chunks; ++c) {
    const float w = std::exp(m[c * stride] - mx);
    sum += w * l[c * stride];
    const float* a = acc + c * stride * hd;
    for (int64_t d = 0; d < hd; ++d) out[d] += w * a[d];
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < hd; ++d) out[d] *= inv;
}

void attention_split(const AttentionParams& p, ThreadPool* pool, int64_t first, int64_t n_pos, float scale) {
  const int64_t hd = p.head_dim, group = p.n_head / p.n_kv_head;
  const int64_t n_chunks = (n_pos + kSplitPositions - 1) / kSplitPositions;

  // Partials per (chunk, query head), on the calling thread (the stream's
  // host thread), kept between calls so a decode step does not allocate.
  thread_local std::vector<float> part_m, part_l, part_acc;
  part_m.resize(n_chunks * p.n_head);
  part_l.resize(n_chunks * p.n_head);
  part_acc.resize(n_chunks * p.n_head * hd);
  // The workers see their own thread_locals: hand them the caller's arrays.
  float *const pm = part_m.data(), *const pl = part_l.data(), *const pacc = part_acc.data();

  // A chunk of a small model is a few microseconds: keep ~64K multiply-adds
  // per task, as attention_by_heads does, so short work stays on the caller.
  const int64_t chunk_work = kSplitPositions * p.n_head * hd * 2;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(chunk_work, 1));
  parallel_rows(pool, n_chunks, grain, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;  // per worker, grown once
    scores.resize(group * kSplitPositions);
    for (int64_t c = begin; c < end; ++c) {
      // One chunk holds every KV head: a thread streams one contiguous span
      // of the cache.
      const int64_t i0 = first + c * kSplitPositions, len = std::min(kSplitPositions, n_pos - c * kSplitPositions);
      for (int64_t kvh = 0; kvh < p.n_kv_head; ++kvh) {
        const int64_t h = c * p.n_head + kvh * group;  // partial of the group's first query head
        attend_chunk(p, kvh, p.q + kvh * group * hd, i0, len, scale, scores.data(), pm + h, pl + h, pacc + h * hd);
      }
    }
  });

  // Merge: n_chunks x n_head x head_dim multiply-adds, small next to the above.
  for (int64_t h = 0; h < p.n_head; ++h)
    merge_chunks(n_chunks, pm + h, pl + h, pacc + h * hd, p.n_head, hd, p.sinks ? p.sinks + h : nullptr,
                 p.out + h * hd);
}

}  // namespace layerstream::kernels::cpu

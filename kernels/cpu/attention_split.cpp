#include "kernels/cpu/attention_split.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/ops.h"

namespace layerstream::kernels::cpu {

void attention_split(const AttentionParams& p, ThreadPool* pool, int64_t first, int64_t n_pos, float scale) {
  const int64_t kv_row = p.n_kv_head * p.head_dim;  // elements per cache position
  const int64_t hd = p.head_dim, group = p.n_head / p.n_kv_head;
  const int64_t n_chunks = (n_pos + kSplitPositions - 1) / kSplitPositions;
  const bool f32 = p.kv_type == GgmlType::F32;
  const auto* kc = static_cast<const uint8_t*>(p.k_cache);
  const auto* vc = static_cast<const uint8_t*>(p.v_cache);

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
      const int64_t i0 = first + c * kSplitPositions, len = std::min(kSplitPositions, n_pos - c * kSplitPositions);
      // Rows of positions i0 .. i0 + len, all KV heads, kv_row elements apart;
      // F16 rows are converted in registers by the row loops.
      const auto scores_of = [&](int64_t kvh, const float* q) {
        if (f32) {
          attention_scores(reinterpret_cast<const float*>(kc) + i0 * kv_row + kvh * hd, kv_row, len, q, group, hd,
                           scale, scores.data());
        } else {
          attention_scores(reinterpret_cast<const uint16_t*>(kc) + i0 * kv_row + kvh * hd, kv_row, len, q, group, hd,
                           scale, scores.data());
        }
      };
      const auto sum_of = [&](int64_t kvh, float* acc) {
        if (f32) {
          attention_weighted_sum(reinterpret_cast<const float*>(vc) + i0 * kv_row + kvh * hd, kv_row, len,
                                 scores.data(), group, hd, acc);
        } else {
          attention_weighted_sum(reinterpret_cast<const uint16_t*>(vc) + i0 * kv_row + kvh * hd, kv_row, len,
                                 scores.data(), group, hd, acc);
        }
      };
      for (int64_t kvh = 0; kvh < p.n_kv_head; ++kvh) {
        const int64_t h0 = kvh * group;  // first query head of this KV head
        scores_of(kvh, p.q + h0 * hd);
        for (int64_t g = 0; g < group; ++g) {  // partial softmax: exp(s - m), unnormalised
          float* sg = scores.data() + g * len;
          float m = -INFINITY, l = 0;
          for (int64_t i = 0; i < len; ++i) m = std::max(m, sg[i]);
          for (int64_t i = 0; i < len; ++i) l += (sg[i] = std::exp(sg[i] - m));
          pm[c * p.n_head + h0 + g] = m;
          pl[c * p.n_head + h0 + g] = l;
        }
        float* acc = pacc + (c * p.n_head + h0) * hd;
        std::fill(acc, acc + group * hd, 0.0f);
        sum_of(kvh, acc);
      }
    }
  });

  // Merge: n_chunks x n_head x head_dim multiply-adds, small next to the above.
  for (int64_t h = 0; h < p.n_head; ++h) {
    float m = p.sinks ? p.sinks[h] : -INFINITY;
    for (int64_t c = 0; c < n_chunks; ++c) m = std::max(m, part_m[c * p.n_head + h]);
    float l = p.sinks ? std::exp(p.sinks[h] - m) : 0.0f;  // the sink's share of the denominator
    float* out = p.out + h * hd;
    std::fill(out, out + hd, 0.0f);
    for (int64_t c = 0; c < n_chunks; ++c) {
      const float w = std::exp(part_m[c * p.n_head + h] - m);
      l += w * part_l[c * p.n_head + h];
      const float* acc = part_acc.data() + (c * p.n_head + h) * hd;
      for (int64_t d = 0; d < hd; ++d) out[d] += w * acc[d];
    }
    const float inv_l = 1.0f / l;
    for (int64_t d = 0; d < hd; ++d) out[d] *= inv_l;
  }
}

}  // namespace layerstream::kernels::cpu

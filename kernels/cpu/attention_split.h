// Attention of one token over a long context, split over position chunks
// (flash-decoding): each chunk of kSplitPositions consecutive cache positions
// is one work item holding every KV head, so a thread streams one contiguous
// span of the cache (all heads of those positions) instead of 512-byte
// slices 2 KiB apart, and both threads share the work of a single token
// whatever the number of KV heads. Each chunk yields, per query head, its
// partial softmax (max m, sum l of exp(s - m)) and the unnormalised sum of V
// rows; the partials are merged exactly:
//   M = max_c m_c,  out = sum_c e^(m_c - M) acc_c / sum_c e^(m_c - M) l_c.
#pragma once

#include <cstdint>

#include "kernels/cpu/thread_pool.h"
#include "kernels/kernels.h"

namespace layerstream::kernels::cpu {

constexpr int64_t kSplitPositions = 128;  // cache positions per work item

// Whether attention_split handles a product: one token attending to more
// than one chunk of positions.
inline bool use_attention_split(const AttentionParams& p, int64_t n_pos) {
  return p.n_tokens == 1 && n_pos > kSplitPositions;
}

// The attention of p's single token over cache positions [first, first +
// n_pos) (the new row already stored), written to p.out; `scale` resolved
// (p.scale or 1/sqrt(head_dim)). REQUIRES p.n_tokens == 1 and p valid.
// Uses a per-thread scratch of n_chunks x n_head x (head_dim + 2) floats on
// the calling thread.
void attention_split(const AttentionParams& p, ThreadPool* pool, int64_t first, int64_t n_pos, float scale);

// The other path (attention.cpp): one work item per (token, KV head), the
// group's query heads together; prefill and short contexts. Reads the cache
// only (new rows stored already). Exposed for the benchmark's side-by-side.
// A token that attends to more than kSplitPositions positions is computed
// chunk by chunk with attend_chunk and merge_chunks, as attention_split
// computes it: every token's output has the bits of a one-token pass
// whatever the pass holds (batch invariance, kernels.h), so KV that decode
// passes wrote equals the KV a prefill writes (a reused prompt prefix).
void attention_by_heads(const AttentionParams& p, ThreadPool* pool, float scale);

// The partial softmax of the `group` query heads of KV head `kvh` (q: their
// group x head_dim floats) over cache positions [i0, i0 + len), len <=
// kSplitPositions: per head g, m[g] = the largest score, l[g] = the sum of
// e^(s - m[g]), and acc[g * head_dim ..] = the sum of e^(s - m[g]) x V rows.
// `scores`: scratch of group x len floats.
void attend_chunk(const AttentionParams& p, int64_t kvh, const float* q, int64_t i0, int64_t len, float scale,
                  float* scores, float* m, float* l, float* acc);

// One head's output from n_chunks partials (chunk c's m, l at m[c * stride],
// l[c * stride], its acc at acc[c * stride * head_dim]) and its attention
// sink (null: none; kernels.h):
//   M = max(sink, max_c m_c),
//   out = sum_c e^(m_c - M) acc_c / (e^(sink - M) + sum_c e^(m_c - M) l_c).
void merge_chunks(int64_t n_chunks, const float* m, const float* l, const float* acc, int64_t stride, int64_t hd,
                  const float* sink, float* out);

}  // namespace layerstream::kernels::cpu

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
void attention_by_heads(const AttentionParams& p, ThreadPool* pool, float scale);

}  // namespace layerstream::kernels::cpu

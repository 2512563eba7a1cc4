// The mixture-of-experts router shared by the CPU and CUDA kernels (both run
// it on the host): per token, softmax over the experts' logits, the n_used
// most probable experts, and their weights renormalised over the chosen
// ones. That is qwen3moe's norm_topk_prob and Mixtral's softmax of the top-k
// logits (the same numbers: exp(l_i - m) / sum over the top-k).
#pragma once

#include <cmath>
#include <cstdint>

namespace layerstream::math {

// logits [n_expert] -> ids [n_used] in decreasing probability (ties: the
// lower index first) and weights [n_used] summing to 1.
// REQUIRES 1 <= n_used <= n_expert.
inline void moe_route(const float* logits, int n_expert, int n_used, int32_t* ids, float* weights) {
  float max = logits[0];
  for (int e = 1; e < n_expert; ++e) max = logits[e] > max ? logits[e] : max;
  // Selection by logit is selection by probability (softmax is monotone);
  // NaN logits are never chosen while a number is left.
  for (int k = 0; k < n_used; ++k) {
    int best = -1;
    for (int e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int j = 0; j < k && !taken; ++j) taken = ids[j] == e;
      if (taken) continue;
      if (best < 0 || logits[e] > logits[best] || (std::isnan(logits[best]) && !std::isnan(logits[e]))) best = e;
    }
    ids[k] = best;
  }
  // The softmax's denominator cancels in the renormalisation over the chosen.
  float sum = 0;
  for (int k = 0; k < n_used; ++k) sum += weights[k] = std::exp(logits[ids[k]] - max);
  for (int k = 0; k < n_used; ++k) weights[k] /= sum;
}

}  // namespace layerstream::math

// CPU sampler: greedy / temperature + top-k + top-p, deterministic given the seed.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/math/argmax.h"

namespace layerstream::kernels::cpu {
namespace {

// splitmix64: the seed -> a uniform double in [0, 1).
double uniform_from_seed(uint64_t seed) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}


}  // namespace

int32_t sample(const float* logits, int64_t n_vocab, float temperature, int32_t top_k, float top_p, uint64_t seed) {
  if (temperature <= 0 || top_k == 1) return static_cast<int32_t>(math::argmax_row(logits, n_vocab));
  int64_t k = top_k <= 0 ? n_vocab : std::min<int64_t>(top_k, n_vocab);
  // Descending logit, ties by lower id, NaN last (kernels/math/argmax.h), so
  // the order is fully determined.
  auto before = [&](int32_t a, int32_t b) { return math::ranks_before(logits[a], a, logits[b], b); };
  std::vector<int32_t> idx;
  if (k * 8 < n_vocab) {
    // The k best in one pass: a heap whose top is the worst kept id; most
    // logits lose one comparison against it (a per-token cost of a few
    // microseconds where sorting the vocabulary took a large part of a ms).
    idx.resize(k);
    std::iota(idx.begin(), idx.end(), 0);
    std::make_heap(idx.begin(), idx.end(), before);
    for (int32_t i = static_cast<int32_t>(k); i < n_vocab; ++i) {
      if (!before(i, idx.front())) continue;
      std::pop_heap(idx.begin(), idx.end(), before);
      idx.back() = i;
      std::push_heap(idx.begin(), idx.end(), before);
    }
    std::sort(idx.begin(), idx.end(), before);
  } else {
    idx.resize(n_vocab);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
    idx.resize(k);
  }

  // NaN logits rank last: drop those that made the cut (a row with fewer
  // than k numbers), so none can be drawn; an all-NaN row gives idx[0], 0.
  while (k > 1 && std::isnan(logits[idx[k - 1]])) --k;
  std::vector<double> prob(k);
  const double max_logit = logits[idx[0]];
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    prob[i] = std::exp((static_cast<double>(logits[idx[i]]) - max_logit) / temperature);
    total += prob[i];
  }
  int64_t keep = k;
  if (top_p < 1.0f) {
    double mass = 0;
    for (int64_t i = 0; i < k; ++i) {
      mass += prob[i] / total;
      if (mass >= top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (int64_t i = 0; i < keep; ++i) kept += prob[i];
  const double u = uniform_from_seed(seed) * kept;
  double c = 0;
  for (int64_t i = 0; i < keep; ++i) {
    c += prob[i];
    if (u < c) return idx[i];
  }
  return idx[keep - 1];
}

}  // namespace layerstream::kernels::cpu

// Random inputs of the kernel benchmarks, from fixed seeds so that runs and
// binaries measure the same numbers.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/math/convert_row.h"
#include "kernels/math/ggml_type.h"

namespace layerstream::kernels {

// n uniform(-1, 1) floats.
inline std::vector<float> uniform_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& e : v) e = d(rng);
  return v;
}

// A [n_out][n_in] weight of `type`, each row encoded from its own
// uniform(-1, 1) floats. Aborts when the type has no encoder.
inline std::vector<uint8_t> random_weight(GgmlType type, int64_t n_out, int64_t n_in) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1, 1);
  const uint64_t rb = ggml_row_bytes(ggml_type_traits(type), n_in);
  std::vector<uint8_t> w(rb * n_out);
  std::vector<float> row(n_in);
  for (int64_t r = 0; r < n_out; ++r) {
    for (float& v : row) v = d(rng);
    if (!math::encode_row(type, row.data(), n_in, w.data() + r * rb).ok()) std::abort();
  }
  return w;
}

}  // namespace layerstream::kernels

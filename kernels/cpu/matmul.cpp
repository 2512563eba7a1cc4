// CPU matmul y[t][o] = w[o] . x[t], parallel over output rows.
// One token: the fused per-type dot (decodes blocks in registers), several
// rows per pass over x where the ISA has a multi-row kernel. Up to
// kBatchInvariantTokens tokens: the same per token over each chunk of rows
// (the chunk stays in cache), so each token gets its one-token bits.
// More tokens: each span of a weight row is decoded once into a stack
// buffer and reused for every token, so the weight is read once per call.
#include <algorithm>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/ops.h"

namespace layerstream::kernels::cpu {

void matmul(const MatmulParams& p, ThreadPool* pool) {
  const RowKernels k = row_kernels(p.w_type);
  const uint64_t row_bytes = ggml_row_bytes(ggml_type_traits(p.w_type), p.n_in);
  const auto* w = static_cast<const uint8_t*>(p.w);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(p.n_in, 1));

  if (p.n_tokens <= kBatchInvariantTokens) {
    parallel_rows(pool, p.n_out, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = 0; t < p.n_tokens; ++t) {
        const float* x = p.x + t * p.n_in;
        float* y = p.y + t * p.n_out;
        if (k.dot_rows) {
          k.dot_rows(w + begin * row_bytes, row_bytes, end - begin, x, p.n_in, y + begin);
        } else {
          for (int64_t o = begin; o < end; ++o) y[o] = k.dot(w + o * row_bytes, x, p.n_in);
        }
      }
    });
    return;
  }
  constexpr int64_t kSpan = 512;  // floats decoded at a time (multiple of the block size)
  parallel_rows(pool, p.n_out, grain, [&](int64_t begin, int64_t end) {
    alignas(64) float buf[kSpan];
    for (int64_t o = begin; o < end; ++o) {
      const uint8_t* row = w + o * row_bytes;
      for (int64_t t = 0; t < p.n_tokens; ++t) p.y[t * p.n_out + o] = 0.0f;
      for (int64_t i = 0; i < p.n_in; i += kSpan) {
        const int64_t len = std::min(kSpan, p.n_in - i);
        const float* span = buf;
        if (p.w_type == GgmlType::F32) {
          span = reinterpret_cast<const float*>(row) + i;
        } else {
          k.decode(row, i, len, buf);
        }
        for (int64_t t = 0; t < p.n_tokens; ++t) p.y[t * p.n_out + o] += dot_f32(span, p.x + t * p.n_in + i, len);
      }
    }
  });
}

}  // namespace layerstream::kernels::cpu

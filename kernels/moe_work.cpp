// The work buffer of the mixture-of-experts FFN and the steps both backends
// share around their matmuls (kernels.h: MoeWork).
#include <algorithm>

#include "kernels/kernels.h"

namespace layerstream::kernels {

namespace {

constexpr uint64_t kAlign = 256;

uint64_t aligned(uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Offsets of MoeWork's arrays from the buffer's start, in field order; the last is the total.
struct MoeWorkOffsets {
  uint64_t at[11];
};

MoeWorkOffsets offsets(int64_t T, int64_t n_embd, int64_t n_ff, int64_t n_expert, int64_t n_used) {
  const uint64_t t = static_cast<uint64_t>(T), k = static_cast<uint64_t>(n_used);
  const uint64_t sizes[10] = {t * n_expert * 4, t * k * 4,     t * k * 4,     (uint64_t(n_expert) + 1) * 4,
                              t * k * 4,        t * k * 4,     t * n_embd * 4, t * n_ff * 4,
                              t * n_ff * 4,     t * n_embd * 4};
  MoeWorkOffsets o{};
  for (int i = 0; i < 10; ++i) o.at[i + 1] = o.at[i] + aligned(sizes[i]);
  return o;
}

}  // namespace

uint64_t moe_work_bytes(int64_t n_tokens, int64_t n_embd, int64_t n_ff, int64_t n_expert, int64_t n_used) {
  return offsets(n_tokens, n_embd, n_ff, n_expert, n_used).at[10];
}

MoeWork moe_work(void* base, int64_t n_tokens, int64_t n_embd, int64_t n_ff, int64_t n_expert, int64_t n_used) {
  const MoeWorkOffsets o = offsets(n_tokens, n_embd, n_ff, n_expert, n_used);
  char* b = static_cast<char*>(base);
  auto f = [&](int i) { return reinterpret_cast<float*>(b + o.at[i]); };
  auto n = [&](int i) { return reinterpret_cast<int32_t*>(b + o.at[i]); };
  return {f(0), n(1), f(2), n(3), n(4), f(5), f(6), f(7), f(8), f(9)};
}

void moe_group_by_expert(const MoeWork& w, int64_t n_tokens, int64_t n_expert, int64_t n_used) {
  // A counting sort, stable in token order: counts, their prefix sums as
  // each expert's fill cursor, then the cursors (now each expert's end)
  // shifted back to starts.
  int32_t* start = w.expert_start;
  std::fill(start, start + n_expert + 1, 0);
  const int64_t n = n_tokens * n_used;
  for (int64_t i = 0; i < n; ++i) ++start[w.ids[i] + 1];
  for (int64_t e = 0; e < n_expert; ++e) start[e + 1] += start[e];
  for (int64_t i = 0; i < n; ++i) {
    const int32_t at = start[w.ids[i]]++;
    w.rows[at] = static_cast<int32_t>(i / n_used);
    w.row_weights[at] = w.weights[i];
  }
  for (int64_t e = n_expert; e > 0; --e) start[e] = start[e - 1];
  start[0] = 0;
}

MatmulParams moe_expert_matmul(const void* tensor, GgmlType type, int64_t e, int64_t n_out, int64_t n_in,
                               const float* x, float* y, int64_t n_tokens) {
  const uint64_t slice = ggml_row_bytes(ggml_type_traits(type), n_in) * static_cast<uint64_t>(n_out);
  return {.w = static_cast<const char*>(tensor) + static_cast<uint64_t>(e) * slice,
          .w_type = type, .n_out = n_out, .n_in = n_in, .x = x, .n_tokens = n_tokens, .y = y};
}

MatmulParams moe_router_matmul(const MoeFfnParams& p, float* logits) {
  return {.w = p.router, .w_type = p.router_type, .n_out = p.n_expert, .n_in = p.n_embd, .x = p.x,
          .n_tokens = p.n_tokens, .y = logits, .scratch = p.scratch, .scratch_bytes = p.scratch_bytes};
}

}  // namespace layerstream::kernels

// The CPU mixture-of-experts FFN (kernels.h: MoeFfnParams): the router with
// f32 activations, the routing on this thread, then per expert its tokens'
// rows gathered, its gate/up/down slices multiplied with the matmul kernels
// of a dense block (exact, or the int8 path), and the rows added back into
// out with their weights.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "kernels/math/activation.h"
#include "kernels/math/moe_router.h"

namespace layerstream::kernels::cpu {

namespace {

// y[r][:] += bias[:] for n rows of `width` (nothing for a null bias).
void add_row_bias(float* y, const float* bias, int64_t n, int64_t width) {
  if (!bias) return;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < width; ++i) y[r * width + i] += bias[i];
}

// gate := act(gate, up) over n values.
void gated_activation(const MoeFfnParams& p, float* gate, const float* up, int64_t n, ThreadPool* pool) {
  switch (p.act) {
    case GatedActivation::kGelu: gelu_mul({gate, up, gate, n}, pool); break;
    case GatedActivation::kSilu: silu_mul({gate, up, gate, n}, pool); break;
    case GatedActivation::kSwigluOai:
      for (int64_t i = 0; i < n; ++i) gate[i] = math::swiglu_oai(gate[i], up[i]);
      break;
  }
}

// The chosen experts of every token into w.ids / w.weights.
void route(const MoeFfnParams& p, const MoeWork& w, ThreadPool* pool) {
  matmul(moe_router_matmul(p, w.logits), pool);
  add_row_bias(w.logits, p.router_bias, p.n_tokens, p.n_expert);
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    math::moe_route(w.logits + t * p.n_expert, static_cast<int>(p.n_expert), static_cast<int>(p.n_used),
                    w.ids + t * p.n_used, w.weights + t * p.n_used);
  }
}

// out[rows] += weight x down_e(act(gate_e . x[rows]) * (up_e . x[rows])).
void run_expert(const MoeFfnParams& p, const MoeWork& w, int64_t e, ThreadPool* pool, bool exact) {
  const int32_t first = w.expert_start[e], n = w.expert_start[e + 1] - first;
  for (int32_t j = 0; j < n; ++j) {
    std::memcpy(w.xg + j * p.n_embd, p.x + w.rows[first + j] * p.n_embd, p.n_embd * sizeof(float));
  }
  const MatmulParams gate_up[] = {moe_expert_matmul(p.gate, p.gate_type, e, p.n_ff, p.n_embd, w.xg, w.gate, n),
                                  moe_expert_matmul(p.up, p.up_type, e, p.n_ff, p.n_embd, w.xg, w.up, n)};
  const MatmulParams down = moe_expert_matmul(p.down, p.down_type, e, p.n_embd, p.n_ff, w.gate, w.y, n);
  if (exact) {
    matmul(gate_up[0], pool);
    matmul(gate_up[1], pool);
  } else {
    matmul_fast_group(gate_up, 2, pool);
  }
  if (p.gate_bias) add_row_bias(w.gate, p.gate_bias + e * p.n_ff, n, p.n_ff);
  if (p.up_bias) add_row_bias(w.up, p.up_bias + e * p.n_ff, n, p.n_ff);
  gated_activation(p, w.gate, w.up, int64_t{n} * p.n_ff, pool);
  if (exact) {
    matmul(down, pool);
  } else {
    matmul_fast(down, pool);
  }
  if (p.down_bias) add_row_bias(w.y, p.down_bias + e * p.n_embd, n, p.n_embd);
  for (int32_t j = 0; j < n; ++j) {
    float* o = p.out + w.rows[first + j] * p.n_embd;
    const float* y = w.y + j * p.n_embd;
    const float wt = w.row_weights[first + j];
    for (int64_t i = 0; i < p.n_embd; ++i) o[i] += wt * y[i];
  }
}

}  // namespace

void moe_ffn(const MoeFfnParams& p, ThreadPool* pool, bool exact) {
  const MoeWork w = moe_work(p.work, p.n_tokens, p.n_embd, p.n_ff, p.n_expert, p.n_used);
  route(p, w, pool);
  moe_group_by_expert(w, p.n_tokens, p.n_expert, p.n_used);
  std::fill(p.out, p.out + p.n_tokens * p.n_embd, 0.0f);
  // Experts in increasing order: each token's sum has one order, whatever
  // the placement or the batch.
  for (int64_t e = 0; e < p.n_expert; ++e) {
    if (w.expert_start[e + 1] > w.expert_start[e]) run_expert(p, w, e, pool, exact);
  }
}

}  // namespace layerstream::kernels::cpu

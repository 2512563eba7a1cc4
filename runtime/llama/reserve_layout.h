// The runner's reserved region (carved first in the arena) and the sizes it
// follows from: positions per sequence, tokens per pass, the offsets of every
// buffer, and the budget errors that name what the reserve needs.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/model/llama_model.h"
#include "runtime/scheduler/layer.h"

namespace layerstream::llama {

// Offsets of the reserved region's buffers (bytes from its start). A host
// mirror of the region (host-site blocks) uses the same offsets.
struct Layout {
  uint64_t kv = 0, kv_plane = 0;  // KV base, bytes of one [n_ctx][n_kv][hd] plane
  // Activations [T][width] (float).
  uint64_t x = 0, xb = 0, q = 0, k = 0, v = 0, att = 0, tmp = 0, gate = 0, up = 0;
  // The head: head_rows rows of normed activations [R][n_embd] and their logits [R][n_vocab].
  uint64_t hrows = 0, hlogits = 0;
  int head_rows = 0;  // rows the head computes at once: n_seq, or max(T, n_seq) with logits_all
  uint64_t out_norm = 0, rope_freqs = 0, tokens = 0, positions = 0;
  uint64_t emb_rows = 0;  // the pass's token_embd rows, gathered on the host [T][row bytes]
  uint64_t scratch = 0, scratch_bytes = 0;
  uint64_t moe_work = 0, moe_work_bytes = 0;  // a mixture of experts' FFN work (kernels::moe_work_bytes), else 0 bytes
  uint64_t kv_bytes = 0, total = 0;
};

// Carves the reserved region: per sequence slot a KV cache, then the
// activations of t_max tokens, the head's rows and matmul scratch.
// logits_all: the head computes up to t_max rows at once (not n_seq).
Layout reserve_layout(const LlamaModel& m, int n_ctx, int n_seq, int t_max, GgmlType kv_type,
                      const kernels::Kernels& k, bool logits_all);

// Positions per sequence, and tokens per pass, that these options give.
int context_for(const LlamaHparams& h, int n_ctx);
int pass_tokens_for(int n_ctx, int n_seq, int prefill_chunk);

// InvalidArgument for options no model could run with.
Status check_runner_options(const RunnerOptions& o);

// OutOfBudget for a budget below the minimum: names what the options need
// (the KV cache among it) and what would fit at this budget: a shorter
// context, or an f16 KV cache.
Status budget_too_small(const LlamaModel& m, const RunnerOptions& o, int n_ctx,
                        const std::vector<sched::LayerSpec>& layers, bool disk_direct, const Layout& L,
                        const kernels::Kernels& k);

}  // namespace layerstream::llama

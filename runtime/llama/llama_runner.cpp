// LlamaRunner's accessors. The runner's work is in files of one job each:
// runner_strategy (what a strategy means to the scheduler), reserve_layout
// (the reserved region and budget errors), runner_layers and runner_create
// (the layer list, create, footprint), batching (decode_tokens, the bench
// helpers), embedding, forward and head (the forward pass), packed_weights,
// kv_cache, host_site and split_matmuls; runner_impl.h holds their state.
#include "runtime/llama/runner_impl.h"

namespace layerstream::llama {

const LlamaModel& LlamaRunner::model() const { return impl_->m; }
const RunnerOptions& LlamaRunner::options() const { return impl_->opt; }
int LlamaRunner::n_ctx() const { return impl_->n_ctx; }
int LlamaRunner::n_seq() const { return impl_->n_seq; }
int LlamaRunner::max_pass_tokens() const { return impl_->t_max; }
int LlamaRunner::max_logits_rows() const { return impl_->lay.head_rows; }
ReserveSize LlamaRunner::reserve() const { return {impl_->lay.kv_bytes, impl_->lay.total - impl_->lay.kv_bytes}; }
sched::Executor& LlamaRunner::executor() { return *impl_->exec; }
const sched::Plan& LlamaRunner::plan() const { return impl_->exec->plan(); }
const sched::PassSummary& LlamaRunner::last_summary() const { return impl_->exec->last_pass().summary; }
sched::TraceRecorder& LlamaRunner::trace() { return impl_->exec->trace(); }
uint64_t LlamaRunner::streamed_bytes_per_pass() const {
  const sched::Plan& p = impl_->exec->plan();
  const auto& b = impl_->exec->layer_bytes();
  return p.bytes_in(sched::Tier::kRam, b) + p.bytes_in(sched::Tier::kDisk, b);
}

}  // namespace layerstream::llama

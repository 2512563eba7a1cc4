// Context: a KV cache of a few sequences on a shared Model; decode of a
// Batch and the KV edits (layerstream/context.h).
#include <algorithm>

#include "runtime/core/status_macros.h"
#include "runtime/llama/context_impl.h"

namespace layerstream {

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Context::~Context() {
  if (impl_) impl_->m->give_back(impl_->slots);
}

int Context::sequences() const { return static_cast<int>(impl_->slots.size()); }
int Context::n_context() const { return impl_->m->n_ctx; }

int Context::position(int seq) const {
  LS_CHECK_MSG(seq >= 0 && seq < sequences(), "Context::position: sequence " + std::to_string(seq) +
                                                 " is outside [0, " + std::to_string(sequences()) + ")");
  MutexLock lock(impl_->m->pass_mu);
  return impl_->m->runner->position(impl_->slots[seq]);
}

Status Context::Impl::run(const Batch& b, bool timing) {
  const size_t n = b.tokens.size();
  if (b.positions.size() != n || b.sequences.size() != n || b.logits.size() != n)
    return Status::InvalidArgument("batch: " + std::to_string(n) + " tokens but " + std::to_string(b.positions.size()) +
                                   " positions, " + std::to_string(b.sequences.size()) + " sequence ids and " +
                                   std::to_string(b.logits.size()) + " logits flags");
  std::vector<llama::PassToken> toks(n);
  row_of.assign(n, -1);
  int rows = 0;
  for (size_t i = 0; i < n; ++i) {
    const int seq = b.sequences[i];
    if (seq < 0 || seq >= static_cast<int>(slots.size()))
      return Status::InvalidArgument("batch token " + std::to_string(i) + ": sequence " + std::to_string(seq) +
                                     " is outside this context's [0, " + std::to_string(slots.size()) + ")");
    toks[i] = {b.tokens[i], b.positions[i], slots[seq], b.logits[i] != 0};
    if (b.logits[i]) row_of[i] = rows++;
  }
  const size_t V = m->info.vocab;
  logits.assign(size_t(rows) * V, 0.0f);
  {
    MutexLock lock(m->pass_mu);
    // Positions, checked here so that errors name our sequences (not slots).
    std::vector<int> next(slots.size());
    for (size_t s = 0; s < slots.size(); ++s) {
      next[s] = m->runner->position(slots[s]);
      if (held[s].size() > static_cast<size_t>(next[s])) held[s].resize(next[s]);
    }
    for (size_t i = 0; i < n; ++i) {
      const int seq = b.sequences[i];
      if (b.positions[i] != next[seq])
        return Status::InvalidArgument("batch token " + std::to_string(i) + " of sequence " + std::to_string(seq) +
                                       " is at position " + std::to_string(b.positions[i]) +
                                       " but the sequence continues at " + std::to_string(next[seq]) +
                                       " (positions follow on; remove a suffix to rewrite it)");
      if (next[seq]++ >= m->runner->n_ctx())
        return Status::InvalidArgument("batch token " + std::to_string(i) + ": sequence " + std::to_string(seq) +
                                       " is full (the context holds " + std::to_string(m->runner->n_ctx()) +
                                       " positions)");
    }
    Status st = m->runner->decode_tokens(toks, logits.data(), abort);
    if (!st.ok()) {
      row_of.assign(n, -1);
      return st;
    }
    if (timing) {
      const sched::PassSummary& ps = m->runner->last_summary();
      ++decode_sums.passes;
      decode_sums.measured_s += ps.measured_s;
      decode_sums.predicted_s += ps.predicted_s;
      decode_sums.lower_bound_s += ps.lower_bound_s;
      decode_sums.efficiency += ps.overlap_efficiency;
      decode_sums.streamed_bytes += ps.streamed_bytes;
      decode_sums.disk_bytes += ps.disk_bytes;
      decode_sums.disk_s += ps.disk_s;
    }
  }
  for (size_t i = 0; i < n; ++i) {  // positions follow on per sequence (checked above)
    std::vector<int32_t>& h = held[b.sequences[i]];
    if (h.size() == static_cast<size_t>(b.positions[i])) h.push_back(b.tokens[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    if (row_of[i] < 0) continue;
    const float* row = logits.data() + size_t(row_of[i]) * V;
    last_logits[b.sequences[i]].assign(row, row + V);
  }
  return Status::OK();
}

Status Context::decode(const Batch& batch) {
  // Tokens decoded through the batch API are in the cache: nothing pending.
  LS_RETURN_IF_ERROR(impl_->run(batch, /*timing=*/true));
  for (int32_t s : batch.sequences) impl_->pending[s].clear();
  return Status::OK();
}

DecodeTotals Context::take_decode_totals() {
  const Impl::PassSums& ps = impl_->decode_sums;
  DecodeTotals t{ps.passes, ps.measured_s, ps.efficiency, ps.streamed_bytes};
  impl_->decode_sums = {};
  return t;
}

int Context::last_decode_tokens() const { return static_cast<int>(impl_->row_of.size()); }

std::span<const float> Context::logits(int i) const {
  const int tokens = last_decode_tokens();
  LS_CHECK_MSG(i >= 0 && i < tokens, "Context::logits: token " + std::to_string(i) +
                                         " is outside the last decode's [0, " + std::to_string(tokens) + ")");
  if (impl_->row_of[i] < 0) return {};
  const size_t V = impl_->m->info.vocab;
  return {impl_->logits.data() + size_t(impl_->row_of[i]) * V, V};
}

Status Context::clear(int seq) {
  if (seq < -1 || seq >= sequences())
    return Status::InvalidArgument("clear: sequence " + std::to_string(seq) + " is outside [0, " +
                                   std::to_string(sequences()) + ") (or -1 for all)");
  MutexLock lock(impl_->m->pass_mu);
  for (int s = 0; s < sequences(); ++s) {
    if (seq != -1 && s != seq) continue;
    LS_RETURN_IF_ERROR(impl_->m->runner->reset(impl_->slots[s]));
    impl_->pending[s].clear();
    impl_->last_logits[s].clear();
    impl_->held[s].clear();
  }
  return Status::OK();
}

Status Context::copy_sequence(int src, int dst) {
  if (src < 0 || src >= sequences() || dst < 0 || dst >= sequences())
    return Status::InvalidArgument("copy_sequence: " + std::to_string(src) + " -> " + std::to_string(dst) +
                                   " is outside [0, " + std::to_string(sequences()) + ")");
  {
    MutexLock lock(impl_->m->pass_mu);
    LS_RETURN_IF_ERROR(impl_->m->runner->copy_sequence(impl_->slots[src], impl_->slots[dst]));
  }
  impl_->pending[dst] = impl_->pending[src];
  impl_->last_logits[dst] = impl_->last_logits[src];
  impl_->held[dst] = impl_->held[src];
  return Status::OK();
}

Status Context::remove(int seq, int from) {
  if (seq < 0 || seq >= sequences())
    return Status::InvalidArgument("remove: sequence " + std::to_string(seq) + " is outside [0, " +
                                   std::to_string(sequences()) + ")");
  if (from < 0) return Status::InvalidArgument("remove: position " + std::to_string(from) + " is negative");
  MutexLock lock(impl_->m->pass_mu);
  LS_RETURN_IF_ERROR(impl_->m->runner->truncate(impl_->slots[seq], from));
  impl_->pending[seq].clear();
  impl_->last_logits[seq].clear();
  if (impl_->held[seq].size() > static_cast<size_t>(from)) impl_->held[seq].resize(from);
  return Status::OK();
}

Status Context::write_trace(const std::string& path) const {
  MutexLock lock(impl_->m->pass_mu);
  return impl_->m->runner->trace().write_chrome_json(path);
}

}  // namespace layerstream

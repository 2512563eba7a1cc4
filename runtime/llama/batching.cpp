// decode_tokens: a batch of (token, position, sequence, wants logits) cut
// into passes of at most max_pass_tokens() tokens (a sequence's tokens in
// order, sequences in order of first appearance, long ones split across
// passes), each pass run through the executor. The bench helpers build
// their batches and decode them the same way.
#include <algorithm>
#include <string>

#include "runtime/core/status_macros.h"
#include "runtime/llama/runner_impl.h"

namespace layerstream::llama {

Status LlamaRunner::decode_tokens(std::span<const PassToken> tokens, float* logits_out,
                                  const std::function<bool()>& abort) {
  Impl& I = *impl_;
  LS_RETURN_IF_ERROR(I.group_batch(tokens, logits_out));
  const std::vector<int> start_pos = I.pos;  // where an abort rolls back to
  for (size_t next_seq = 0; next_seq < I.batch.order.size();) {
    if (abort && abort()) {
      I.pos = start_pos;  // the KV cache is positional: forgetting the positions undoes the passes
      return Status::Cancelled("decode aborted by the abort callback (the batch's tokens were not kept)");
    }
    I.next_pass(tokens, logits_out, next_seq);
    LS_RETURN_IF_ERROR(I.run_pass(I.batch.pass));
  }
  return Status::OK();
}

// Checks every token (sequence, position, id) before any pass runs, groups
// the batch by sequence and numbers the logits rows: the k-th token that
// asks for logits writes row k.
Status LlamaRunner::Impl::group_batch(std::span<const PassToken> tokens, float* logits_out) {
  if (tokens.empty()) return Status::InvalidArgument("decode: the batch has no tokens");
  batch.order.clear();
  batch.of_seq.resize(n_seq);
  for (std::vector<int>& v : batch.of_seq) v.clear();
  batch.out_row.assign(tokens.size(), -1);
  batch.done.assign(n_seq, 0);
  const int32_t n_vocab = static_cast<int32_t>(m.hparams.n_vocab);
  int n_logits = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const PassToken& t = tokens[i];
    if (t.seq < 0 || t.seq >= n_seq)
      return Status::InvalidArgument("decode: token " + std::to_string(i) + " has sequence " + std::to_string(t.seq) +
                                     ", outside [0, " + std::to_string(n_seq) + ")");
    std::vector<int>& mine = batch.of_seq[t.seq];
    const int want = pos[t.seq] + static_cast<int>(mine.size());
    if (t.pos != want)
      return Status::InvalidArgument("decode: token " + std::to_string(i) + " of sequence " + std::to_string(t.seq) +
                                     " is at position " + std::to_string(t.pos) + " but the sequence continues at " +
                                     std::to_string(want) + " (positions must follow on; remove a suffix first)");
    if (t.pos >= n_ctx)
      return Status::InvalidArgument("decode: sequence " + std::to_string(t.seq) + " is full: the context holds " +
                                     std::to_string(n_ctx) + " tokens");
    if (t.token < 0 || t.token >= n_vocab)
      return Status::InvalidArgument("token id " + std::to_string(t.token) + " is outside the vocabulary [0, " +
                                     std::to_string(n_vocab) + ")");
    if (mine.empty()) batch.order.push_back(t.seq);
    mine.push_back(static_cast<int>(i));
    if (t.logits) batch.out_row[i] = n_logits++;
  }
  if (n_logits > 0 && logits_out == nullptr) return Status::InvalidArgument("decode: logits requested but no output");
  return Status::OK();
}

// batch.pass := the next pass from sequence order[next_seq] on (at most
// t_max tokens), its token ids and positions written to tokens_host and
// pos_host; advances next_seq past the sequences it finishes.
void LlamaRunner::Impl::next_pass(std::span<const PassToken> tokens, float* logits_out, size_t& next_seq) {
  Pass& p = batch.pass;
  p.clear();
  auto* ids = static_cast<int32_t*>(tokens_host.data());
  auto* positions = static_cast<int32_t*>(pos_host.data());
  const size_t V = m.hparams.n_vocab;
  int budget = t_max, row = 0;
  while (next_seq < batch.order.size() && budget > 0) {
    const int seq = batch.order[next_seq];
    const std::vector<int>& mine = batch.of_seq[seq];
    const size_t from = batch.done[seq];
    const int n = static_cast<int>(std::min<size_t>(mine.size() - from, budget));
    for (int j = 0; j < n; ++j) {
      const int bi = mine[from + j];
      ids[row + j] = tokens[bi].token;
      positions[row + j] = pos[seq] + j;
      if (batch.out_row[bi] >= 0) p.rows.push_back({row + j, logits_out + batch.out_row[bi] * V});
    }
    p.segs.push_back({seq, pos[seq], n, row});
    batch.done[seq] += n;
    budget -= n;
    row += n;
    if (batch.done[seq] == mine.size()) ++next_seq;
  }
  p.n_tokens = row;
}

// One executor pass over `p` (its ids and positions already in tokens_host
// and pos_host); on success its sequences advance past its tokens.
Status LlamaRunner::Impl::run_pass(const Pass& p) {
  LS_RETURN_IF_ERROR(gather_embedding_rows(p.n_tokens));
  LS_RETURN_IF_ERROR(embed(p, exec->compute_stream()));
  in_flight = &p;
  const Status st = exec->run_pass(p.n_tokens);
  in_flight = nullptr;
  if (!st.ok()) return st;
  for (const Segment& s : p.segs) pos[s.seq] = s.start_pos + s.n;
  return Status::OK();
}

Status LlamaRunner::bench_prefill(int n_tokens) {
  Impl& I = *impl_;
  if (n_tokens < 1 || n_tokens > I.t_max || n_tokens > I.n_ctx)
    return Status::InvalidArgument("bench_prefill: " + std::to_string(n_tokens) + " tokens outside [1, " +
                                   std::to_string(std::min(I.t_max, I.n_ctx)) + "] (prefill chunk / context)");
  std::vector<PassToken> batch(n_tokens);
  for (int i = 0; i < n_tokens; ++i)
    batch[i] = {static_cast<int32_t>((i * 7919u + 1) % I.m.hparams.n_vocab), i, 0, i == n_tokens - 1};
  I.pos[0] = 0;
  return decode_tokens(batch, static_cast<float*>(I.bench_logits_host.data()));
}

Status LlamaRunner::bench_decode(int n_seqs, int at_pos) {
  Impl& I = *impl_;
  if (n_seqs < 1 || n_seqs > I.n_seq)
    return Status::InvalidArgument("bench_decode: batch " + std::to_string(n_seqs) + " outside [1, " +
                                   std::to_string(I.n_seq) + "] (n_seq)");
  if (at_pos >= I.n_ctx)
    return Status::InvalidArgument("bench_decode: position " + std::to_string(at_pos) +
                                   " is not below the context length " + std::to_string(I.n_ctx));
  std::vector<PassToken> batch(n_seqs);
  for (int i = 0; i < n_seqs; ++i) {
    if (at_pos >= 0) I.pos[i] = at_pos;
    if (I.pos[i] >= I.n_ctx) I.pos[i] = 0;
    batch[i] = {static_cast<int32_t>((I.pos[i] * 31u + i + 1) % I.m.hparams.n_vocab), I.pos[i], i, true};
  }
  return decode_tokens(batch, static_cast<float*>(I.bench_logits_host.data()));
}

}  // namespace layerstream::llama

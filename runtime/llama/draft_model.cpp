// A draft model (layerstream/speculative.h): a smaller model with the
// target's vocabulary, decoding greedily in a context of its own. Its KV
// cache follows the target's sequence: each proposal first rolls it back to
// the longest prefix it shares with the target's tokens, then decodes the
// rest, then drafts one token per pass (a tree: the draft's top tokens for
// the next position, each continued greedily).
#include <algorithm>

#include "kernels/math/argmax.h"
#include "layerstream/context.h"
#include "layerstream/model.h"
#include "layerstream/speculative.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/draft_history.h"

namespace layerstream {
namespace {

class ModelDraft final : public DraftSource {
 public:
  ModelDraft(std::shared_ptr<Model> model, std::unique_ptr<Context> ctx)
      : model_(std::move(model)), ctx_(std::move(ctx)) {}

  Result<std::vector<int32_t>> propose(int first_position, std::span<const int32_t> tokens,
                                       int max_tokens) override {
    const int lengths[] = {max_tokens};
    LS_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> tree, propose_tree(first_position, tokens, lengths));
    return tree.empty() ? std::vector<int32_t>{} : std::move(tree[0]);
  }

  // Branch r starts with the draft's rank-r token for the next position and
  // continues greedily. The side branches are decoded first and rolled back,
  // so the draft's KV cache ends holding branch 0, the likeliest to be kept.
  Result<std::vector<std::vector<int32_t>>> propose_tree(int first_position, std::span<const int32_t> tokens,
                                                         std::span<const int> lengths) override {
    std::vector<std::vector<int32_t>> tree;
    if (!history_.update(first_position, tokens) || lengths.empty() || history_.tokens().empty()) return tree;
    const std::vector<int32_t> h = history_.tokens();
    // Room for the history and the drafts that get decoded (all but the last).
    const int room = ctx_->n_context() - static_cast<int>(h.size()) + 1;
    LS_RETURN_IF_ERROR(catch_up(h));
    const std::vector<int32_t> firsts = top_tokens(static_cast<int>(lengths.size()));
    tree.resize(firsts.size());
    for (int r = static_cast<int>(firsts.size()) - 1; r >= 0; --r) {
      const int length = std::min(lengths[r], room);
      if (length < 1) return std::vector<std::vector<int32_t>>{};
      LS_RETURN_IF_ERROR(rewind(h.size()));
      tree[r].push_back(firsts[r]);
      LS_RETURN_IF_ERROR(extend(tree[r], length));
    }
    return tree;
  }
  std::string name() const override { return "draft model " + model_->info().path; }

 private:
  // Rolls the draft's KV back to what it shares with `h`, then decodes the
  // rest of `h` (at least its last token: the drafts start from its logits).
  // The last token gets a pass of its own, as the target's prompt and its
  // first sampled token do: a draft equal to the target then computes the
  // target's bits (passes beyond kBatchInvariantTokens round differently).
  Status catch_up(const std::vector<int32_t>& h) {
    size_t keep = std::mismatch(held_.begin(), held_.end(), h.begin(), h.end()).first - held_.begin();
    keep = std::min(keep, h.size() - 1);
    LS_RETURN_IF_ERROR(ctx_->remove(0, static_cast<int>(keep)));
    held_.resize(keep);
    if (keep + 1 < h.size()) {
      Batch rest;
      rest.add_sequence(std::vector<int32_t>(h.begin() + keep, h.end() - 1), static_cast<int32_t>(keep), 0, false);
      LS_RETURN_IF_ERROR(ctx_->decode(rest));
    }
    Batch last;
    last.add(h.back(), static_cast<int32_t>(h.size() - 1), 0, true);
    LS_RETURN_IF_ERROR(ctx_->decode(last));
    held_ = h;
    return Status::OK();
  }

  // The n likeliest next tokens after the last decode, the argmax first
  // (the token greedy decoding takes, ties included).
  std::vector<int32_t> top_tokens(int n) const {
    const std::span<const float> logits = ctx_->logits(ctx_->last_decode_tokens() - 1);
    const int64_t V = static_cast<int64_t>(logits.size());
    std::vector<int32_t> out{static_cast<int32_t>(math::argmax_row(logits.data(), V))};
    if (n <= 1) return out;
    std::vector<int32_t> ids(V);
    for (int64_t i = 0; i < V; ++i) ids[i] = static_cast<int32_t>(i);
    const int64_t k = std::min<int64_t>(n, V);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (int64_t i = 0; i < k && static_cast<int>(out.size()) < n; ++i)
      if (ids[i] != out[0]) out.push_back(ids[i]);
    return out;
  }

  // Forgets the draft's positions >= keep (the history ends there).
  Status rewind(size_t keep) {
    if (held_.size() <= keep) return Status::OK();
    LS_RETURN_IF_ERROR(ctx_->remove(0, static_cast<int>(keep)));
    held_.resize(keep);
    return Status::OK();
  }

  // Greedy continuation of `branch` (its tokens after the history) up to
  // `length` tokens, decoding all but the last.
  Status extend(std::vector<int32_t>& branch, int length) {
    while (static_cast<int>(branch.size()) < length) {
      Batch next;
      next.add(branch.back(), ctx_->position(0), 0, true);
      LS_RETURN_IF_ERROR(ctx_->decode(next));
      held_.push_back(branch.back());
      const std::span<const float> logits = ctx_->logits(0);
      branch.push_back(static_cast<int32_t>(math::argmax_row(logits.data(), static_cast<int64_t>(logits.size()))));
    }
    return Status::OK();
  }

  std::shared_ptr<Model> model_;
  std::unique_ptr<Context> ctx_;
  DraftHistory history_;        // the target's sequence as told
  std::vector<int32_t> held_;   // what the draft's KV cache holds, by position
};

// The first token whose text differs between the two vocabularies, or -1.
int32_t first_vocab_difference(const Model& a, const Model& b) {
  for (int32_t id = 0; id < a.n_vocab(); ++id)
    if (a.detokenize({id}) != b.detokenize({id})) return id;
  return -1;
}

}  // namespace

Result<std::unique_ptr<DraftSource>> make_model_draft(std::shared_ptr<Model> draft, const Model& target) {
  if (!draft) return Status::InvalidArgument("no draft model");
  if (draft->n_vocab() != target.n_vocab())
    return Status::InvalidArgument("the draft model " + draft->info().path + " has a vocabulary of " +
                                   std::to_string(draft->n_vocab()) + " tokens, the model " + target.info().path +
                                   " " + std::to_string(target.n_vocab()) + ": a draft needs the same vocabulary");
  if (const int32_t id = first_vocab_difference(*draft, target); id >= 0)
    return Status::InvalidArgument("the draft model " + draft->info().path + " and the model " + target.info().path +
                                   " differ at token " + std::to_string(id) + " (\"" + draft->detokenize({id}) +
                                   "\" vs \"" + target.detokenize({id}) + "\"): a draft needs the same vocabulary");
  LS_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, draft->create_context());
  return std::unique_ptr<DraftSource>(std::make_unique<ModelDraft>(std::move(draft), std::move(ctx)));
}

}  // namespace layerstream

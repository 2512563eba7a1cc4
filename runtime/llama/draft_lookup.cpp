// n-gram prompt lookup (layerstream/speculative.h): the draft is what
// followed the latest earlier occurrence of the sequence's last n tokens
// (a tree: what followed several occurrences, one branch per next token).
// Text that quotes or edits a passage of the prompt repeats it token for
// token, and there the draft is free and mostly right.
#include <algorithm>

#include "layerstream/speculative.h"
#include "runtime/llama/draft_history.h"

namespace layerstream {
namespace {

class LookupDraft final : public DraftSource {
 public:
  explicit LookupDraft(const LookupOptions& o) : opt_(o) {}

  Result<std::vector<int32_t>> propose(int first_position, std::span<const int32_t> tokens,
                                       int max_tokens) override {
    const int lengths[] = {max_tokens};
    std::vector<std::vector<int32_t>> tree = continuations(first_position, tokens, lengths);
    return tree.empty() ? std::vector<int32_t>{} : std::move(tree[0]);
  }

  // Branches: what followed earlier occurrences of the last n tokens, the
  // longest n first and the latest occurrence first within an n, one branch
  // per distinct next token.
  Result<std::vector<std::vector<int32_t>>> propose_tree(int first_position, std::span<const int32_t> tokens,
                                                         std::span<const int> lengths) override {
    return continuations(first_position, tokens, lengths);
  }
  std::string name() const override { return "lookup"; }

 private:
  std::vector<std::vector<int32_t>> continuations(int first_position, std::span<const int32_t> tokens,
                                                  std::span<const int> lengths) {
    std::vector<std::vector<int32_t>> out;
    if (!history_.update(first_position, tokens)) return out;
    const std::vector<int32_t>& h = history_.tokens();
    const int64_t n_tokens = static_cast<int64_t>(h.size());
    for (int n = std::min<int64_t>(opt_.max_ngram, n_tokens - 1); n >= opt_.min_ngram; --n) {
      const int64_t tail = n_tokens - n;  // the last n tokens start here
      // The latest earlier occurrence first: what followed it is the
      // likeliest continuation of what is being written now.
      for (int64_t at = tail - 1; at >= 0 && out.size() < lengths.size(); --at) {
        if (!std::equal(h.begin() + at, h.begin() + at + n, h.begin() + tail)) continue;
        const int64_t from = at + n, len = std::min<int64_t>(lengths[out.size()], n_tokens - from);
        const bool seen = std::any_of(out.begin(), out.end(), [&](const auto& b) { return b[0] == h[from]; });
        if (len > 0 && !seen) out.emplace_back(h.begin() + from, h.begin() + from + len);
      }
    }
    return out;
  }

  LookupOptions opt_;
  DraftHistory history_;
};

}  // namespace

Result<std::unique_ptr<DraftSource>> make_lookup_draft(const LookupOptions& o) {
  if (o.min_ngram < 1 || o.max_ngram < o.min_ngram)
    return Status::InvalidArgument("lookup n-gram lengths must satisfy 1 <= min_ngram <= max_ngram (got " +
                                   std::to_string(o.min_ngram) + ", " + std::to_string(o.max_ngram) + ")");
  return std::unique_ptr<DraftSource>(std::make_unique<LookupDraft>(o));
}

}  // namespace layerstream

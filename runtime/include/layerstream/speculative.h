// Speculative decoding: a cheap draft proposes the next few tokens, the model
// checks all of them in one pass (a pass costs about the bytes it streams,
// whatever the number of tokens it carries), and generation keeps the
// longest prefix the model agrees with, plus the model's own next token.
//
// Output: exactly the tokens plain decoding gives, greedy or sampled with
// the same seed. A verification pass carries at most kMaxDraftTokens + 1
// tokens, which the kernels compute bit for bit as one-token passes, and
// the sampler draws once per row in order, as plain decoding does. A drafted
// token is kept when the model's own draw equals it: for drafts that propose
// one token per position (both sources here) that is the rejection rule of
// Leviathan et al., so the output follows the model's distribution.
//
// Trees (SpeculativeOptions::branches > 1): the source proposes several
// branches, each a chain whose first token differs from the others' (the
// draft's top alternatives for the next position, or what followed several
// earlier occurrences). Each side branch runs as a sequence of its own in the
// same pass, a copy of the sequence's KV cache that carries the sampled token
// again before its drafts; the model's draw from the sampled token's row
// picks the branch whose first token equals it (if any), and the draws go on
// down that branch as for a chain. Its KV cache becomes the sequence's. With
// one draw shared by all branches, the multi-draft rules of SpecInfer and
// SpecExec (try the branches in turn, each accepted with the residual
// probability left by the ones before) reduce to "keep the branch whose
// token the draw equals", so sampled output is again plain sampling's for
// the same seed.
//
// Use: GenerateOptions::speculative.draft = make_lookup_draft() (or
// make_model_draft(...)); Context::generate then reports the figures in
// Stats::speculative. Contexts of one sequence only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {

class Model;

// Most tokens one verification pass drafts (the pass carries one more).
constexpr int kMaxDraftTokens = 7;
// Most branches of a draft tree. A pass carries the drafts plus the sampled
// token once per branch: drafts + branches <= kMaxDraftTokens + 1.
constexpr int kMaxDraftBranches = 4;

// Proposes the tokens that may follow a sequence.
// Thread safety: one generate() at a time uses a source.
class DraftSource {
 public:
  virtual ~DraftSource() = default;
  // Up to max_tokens tokens to follow `tokens`, the sequence's tokens at
  // positions first_position, first_position + 1, ... (the last one is the
  // token about to be decoded). Fewer, or none, is fine. A source keeps what
  // it has seen of earlier positions, so a later call may start where the
  // sequence was rewritten (a rollback) or where it continues.
  virtual Result<std::vector<int32_t>> propose(int first_position, std::span<const int32_t> tokens,
                                               int max_tokens) = 0;
  // A tree: up to lengths.size() branches, branch r at most lengths[r]
  // tokens, in the order of their likelihood; every branch non-empty and
  // its first token unlike the other branches' first tokens. The default is
  // one branch, propose()'s chain. With no lengths nothing is drafted, the
  // tokens are only recorded (the default asks propose() for 0 tokens):
  // generate() tells the source so where it stops, so that the next call's
  // tokens continue what the source has seen.
  virtual Result<std::vector<std::vector<int32_t>>> propose_tree(int first_position, std::span<const int32_t> tokens,
                                                                 std::span<const int> lengths);
  // What the source is ("lookup", "draft model <path>"), for reports.
  virtual std::string name() const = 0;
};

// n-gram prompt lookup: no second model. The draft is what followed the
// latest earlier occurrence of the sequence's last n tokens (n from max_ngram
// down to min_ngram) in the prompt and the text generated so far.
struct LookupOptions {
  int min_ngram = 1;
  int max_ngram = 3;
};
Result<std::unique_ptr<DraftSource>> make_lookup_draft(const LookupOptions& options = {});

// A draft model: any model whose vocabulary is the target's (same size and
// the same text for every token; InvalidArgument naming the first token
// that differs otherwise). It decodes greedily in a context of its own,
// whose KV cache follows the target's sequence (rolled back where the
// target rejected its tokens).
Result<std::unique_ptr<DraftSource>> make_model_draft(std::shared_ptr<Model> draft, const Model& target);

// How Context::generate drafts (GenerateOptions::speculative).
struct SpeculativeOptions {
  std::shared_ptr<DraftSource> draft;  // null: plain decoding, one token per pass
  int draft_max = kMaxDraftTokens;     // drafted tokens per pass, 1..kMaxDraftTokens
  // Choose each pass's draft length (up to draft_max) from measured costs:
  // the pass time against the tokens it carries, the draft's time per token,
  // the acceptance per depth. false: always draft_max.
  bool adaptive = true;
  // Most branches of the draft tree (1: a chain). draft_max counts the
  // drafts of all branches; each side branch also carries the sampled token,
  // so draft_max + branches <= kMaxDraftTokens + 1. Each side branch needs a
  // free sequence of the model's KV pool (ModelOptions::sequences) while
  // generate() runs. Adaptive: the shape (branches and their lengths) is
  // chosen from the measured acceptance of first and alternative drafts;
  // fixed: draft_max drafts every pass, in the shape (up to `branches`
  // branches) the measured acceptance says keeps the most.
  int branches = 1;
};

// What speculation did in one generate() (Stats::speculative).
struct SpeculativeStats {
  int passes = 0;          // verification passes
  int tokens = 0;          // tokens those passes generated (accepted drafts + the model's own)
  int drafted = 0;         // tokens drafted
  int accepted = 0;        // drafted tokens kept
  // Per depth d (0 = the first drafted token of a pass): how many passes
  // drafted a token at depth d, and how many of those were kept.
  std::vector<int> drafted_at_depth, accepted_at_depth;
  double draft_s = 0;      // time the draft source took (counted in Stats::decode_s)
  int draft_lengths_sum = 0;  // drafts asked for over the passes (adaptive: the chosen lengths)
  // Trees: tokens the verification passes carried (the sampled token once per
  // branch, and every branch's drafts), branches drafted, and passes whose
  // kept tokens came from a side branch (not the first).
  int pass_tokens = 0;
  int branches = 0;
  int side_branch_kept = 0;
  double mean_draft_length() const { return passes ? double(draft_lengths_sum) / passes : 0; }
  double mean_branches() const { return passes ? double(branches) / passes : 0; }
  double tokens_per_pass() const { return passes ? double(tokens) / passes : 0; }
  double acceptance() const { return drafted ? double(accepted) / drafted : 0; }
};

}  // namespace layerstream

// DraftLength (draft_length.h).
#include "runtime/llama/draft_length.h"

#include <algorithm>

namespace layerstream {
namespace {

constexpr double kAlpha = 0.2;       // moving-average weight of a new sample
constexpr double kPriorKept = 0.6;   // acceptance at a depth before it is measured
// A side branch's first token after the ones before missed, before it is
// measured: SmolLM2's Q4_0 draft keeps its second guess on about half the
// passes its first missed. High enough that a tree is tried, and then the
// measurement decides.
constexpr double kPriorAlternative = 0.5;

double ema(double old, double sample) { return old == 0 ? sample : old + kAlpha * (sample - old); }

}  // namespace

DraftLength::DraftLength(int cap, int max_branches, int pass_limit)
    : cap_(std::max(1, cap)),
      max_branches_(std::max(1, max_branches)),
      pass_limit_(pass_limit > 0 ? pass_limit : cap_ + max_branches_),
      alt_kept_(max_branches_, kPriorAlternative),
      pass_s_(std::max(cap_ + 2, pass_limit_ + 1), 0.0),
      kept_(cap_, kPriorKept) {}

void DraftLength::record_pass(int tokens, double seconds) {
  if (tokens >= 1 && tokens < static_cast<int>(pass_s_.size()) && seconds > 0)
    pass_s_[tokens] = ema(pass_s_[tokens], seconds);
}

void DraftLength::record_draft(int drafted, double seconds) {
  if (drafted < 1) return;
  const double per_token = std::max(0.0, seconds) / drafted;
  draft_s_per_token_ = drafted_ ? draft_s_per_token_ + kAlpha * (per_token - draft_s_per_token_) : per_token;
  drafted_ = true;
}

void DraftLength::record_depth(int depth, bool kept) {
  if (depth >= 0 && depth < cap_) kept_[depth] += kAlpha * ((kept ? 1.0 : 0.0) - kept_[depth]);
}

void DraftLength::record_alternative(int rank, bool kept) {
  if (rank >= 1 && rank < max_branches_) alt_kept_[rank] += kAlpha * ((kept ? 1.0 : 0.0) - alt_kept_[rank]);
}

// Least squares line through the measured sizes; with one size measured the
// pass is taken as flat (the streamed case: bytes / link, whatever it carries).
double DraftLength::pass_seconds(int tokens) const {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t t = 1; t < pass_s_.size(); ++t) {
    if (pass_s_[t] == 0) continue;
    n += 1, sx += t, sy += pass_s_[t], sxx += double(t) * t, sxy += t * pass_s_[t];
  }
  if (n == 0) return 0;
  const double denom = n * sxx - sx * sx;
  const double slope = n > 1 && denom > 0 ? std::max(0.0, (n * sxy - sx * sy) / denom) : 0.0;
  const double intercept = (sy - slope * sx) / n;
  return std::max(intercept + slope * tokens, 1e-9);
}

double DraftLength::rate(int k) const { return tree_rate({k}); }

double DraftLength::expected_tokens(const std::vector<int>& lengths) const {
  double kept = 0, missed_before = 1;  // missed_before: no earlier branch's first token was drawn
  for (size_t r = 0; r < lengths.size(); ++r) {
    const double first = r == 0 ? kept_[0] : alt_kept_[r];
    double reach = missed_before * first, along = 0;
    for (int d = 0; d < lengths[r]; ++d) {
      if (d > 0) reach *= kept_[std::min(d, cap_ - 1)];
      along += reach;
    }
    kept += along;
    missed_before *= 1 - first;
  }
  return kept;
}

double DraftLength::tree_rate(const std::vector<int>& lengths) const {
  int drafts = 0;
  for (int l : lengths) drafts += l;
  const int carried = drafts + static_cast<int>(lengths.size());
  const double cost = pass_seconds(carried) + drafts * draft_s_per_token_;
  return cost > 0 ? (1 + expected_tokens(lengths)) / cost : 0;
}

template <class Visit>
void DraftLength::each_shape(std::vector<int>& lengths, int drafts_left, Visit&& visit) const {
  if (!lengths.empty()) visit(lengths);
  const int branches = static_cast<int>(lengths.size());
  if (branches == max_branches_) return;
  int drafts = 0;
  for (int l : lengths) drafts += l;
  for (int l = 1; l <= drafts_left && drafts + l + branches + 1 <= pass_limit_; ++l) {
    lengths.push_back(l);
    each_shape(lengths, drafts_left - l, visit);
    lengths.pop_back();
  }
}

std::vector<int> DraftLength::choose_tree() const {
  if (pass_seconds(1) == 0 || max_branches_ == 1) return {choose()};
  std::vector<int> best{1}, lengths;
  double best_rate = tree_rate(best);
  each_shape(lengths, cap_, [&](const std::vector<int>& shape) {
    const double r = tree_rate(shape);
    if (r > best_rate) best_rate = r, best = shape;
  });
  return best;
}

std::vector<int> DraftLength::most_kept(int drafts) const {
  const int budget = std::max(1, std::min(drafts, cap_));
  std::vector<int> best{budget}, lengths;
  double best_kept = expected_tokens(best);
  each_shape(lengths, budget, [&](const std::vector<int>& shape) {
    int sum = 0;
    for (int l : shape) sum += l;
    const double kept = expected_tokens(shape);
    if (sum == budget && kept > best_kept) best_kept = kept, best = shape;
  });
  return best;
}

int DraftLength::choose() const {
  if (pass_seconds(1) == 0) return cap_;
  int best = 1;
  for (int k = 2; k <= cap_; ++k)
    if (rate(k) > rate(best)) best = k;
  return best;
}

}  // namespace layerstream

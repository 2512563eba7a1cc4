// DraftLength (draft_length.h).
#include "runtime/llama/draft_length.h"

#include <algorithm>
#include <utility>

namespace layerstream {
namespace {

constexpr double kAlpha = 0.2;       // moving-average weight of a new sample
constexpr double kPriorKept = 0.6;   // acceptance at a depth before it is measured (weight: one sample)
// Plain passes between probes (a one-token draft where none pays): about 1
// pass in 16 pays a draft token, a few percent of decode time at most.
constexpr int kProbeEvery = 16;

double ema(double old, double sample) { return old == 0 ? sample : old + kAlpha * (sample - old); }

}  // namespace

DraftLength::DraftLength(int cap)
    : cap_(std::max(1, cap)), pass_s_(cap_ + 2, 0.0), pass_count_(cap_ + 2, 0), kept_(cap_, kPriorKept), judged_(cap_, 0) {}

void DraftLength::record_pass(int tokens, double seconds) {
  if (tokens < 1 || tokens >= static_cast<int>(pass_s_.size()) || seconds <= 0) return;
  pass_s_[tokens] = ema(pass_s_[tokens], seconds);
  ++pass_count_[tokens];
}

// The first proposal of a generation also catches the source up on the
// prompt (a draft model decodes it), which overstates its cost per token:
// the second proposal's figure replaces it, later ones are averaged in.
// A probe's time is not the draft's cost either: a draft model decodes the
// tokens of the plain passes before it in that call.
void DraftLength::record_draft(int drafted, double seconds) {
  const bool probe = std::exchange(probing_, false);
  if (drafted < 1 || probe) return;
  const double per_token = std::max(0.0, seconds) / drafted;
  draft_s_per_token_ = proposals_ < 2 ? per_token : draft_s_per_token_ + kAlpha * (per_token - draft_s_per_token_);
  ++proposals_;
}

// The mean of the prior and the samples while they are few (weight 1 / (n + 1)
// for the n-th), then a moving average of weight kAlpha.
void DraftLength::record_depth(int depth, bool kept) {
  if (depth < 0 || depth >= cap_) return;
  const double weight = std::max(kAlpha, 1.0 / (++judged_[depth] + 1));
  kept_[depth] += weight * ((kept ? 1.0 : 0.0) - kept_[depth]);
}

// Least squares line through the measured sizes, each weighted by how often
// it was measured (up to kFullWeight): a size seen once, long ago (a busy
// moment of the machine), must not set the slope that sizes measured every
// pass disagree with. With one size measured the pass is taken as flat (the
// streamed case: bytes / link, whatever it carries).
double DraftLength::pass_seconds(int tokens) const {
  constexpr double kFullWeight = 8;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t t = 1; t < pass_s_.size(); ++t) {
    if (pass_s_[t] == 0) continue;
    const double w = std::min<double>(kFullWeight, pass_count_[t]);
    n += w, sx += w * t, sy += w * pass_s_[t], sxx += w * t * t, sxy += w * t * pass_s_[t];
  }
  if (n == 0) return 0;
  const double denom = n * sxx - sx * sx;
  const double slope = denom > 1e-12 ? std::max(0.0, (n * sxy - sx * sy) / denom) : 0.0;
  const double intercept = (sy - slope * sx) / n;
  return std::max(intercept + slope * tokens, 1e-9);
}

double DraftLength::rate(int k) const {
  double tokens = 1, reach = 1;
  for (int d = 0; d < k; ++d) {
    reach *= kept_[d];
    tokens += reach;
  }
  const double cost = pass_seconds(k + 1) + k * draft_s_per_token_;
  return cost > 0 ? tokens / cost : 0;
}

int DraftLength::choose() {
  if (pass_seconds(1) == 0) return cap_;
  int best = 0;
  for (int k = 1; k <= cap_; ++k)
    if (rate(k) > rate(best)) best = k;
  if (best > 0) {
    plain_passes_ = 0;
    return best;
  }
  if (++plain_passes_ < kProbeEvery) return 0;
  plain_passes_ = 0;
  probing_ = true;
  return 1;
}

}  // namespace layerstream

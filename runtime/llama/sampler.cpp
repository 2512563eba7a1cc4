// SamplerChain (layerstream/sampler.h): stages narrow and reshape a list of
// candidate tokens, then one draw from their softmax.
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "kernels/math/argmax.h"
#include "layerstream/sampler.h"

namespace layerstream {

namespace {
// The one ranking rule of every sampler (kernels/math/argmax.h): the larger
// logit first, the lower id on a tie, NaN last.
bool ranks_before(const auto& a, const auto& b) { return math::ranks_before(a.logit, a.id, b.logit, b.id); }
}  // namespace

std::vector<double> SamplerChain::sorted_probs(std::vector<Candidate>& c) {
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return ranks_before(a, b); });
  std::vector<double> p(c.size());
  double sum = 0;
  for (size_t i = 0; i < c.size(); ++i) sum += p[i] = std::exp(double(c[i].logit) - double(c[0].logit));
  for (double& x : p) x /= sum;
  return p;
}

SamplerChain::SamplerChain(uint64_t seed) : seed_(seed), rng_(seed) {}

SamplerChain SamplerChain::from(const SamplingOptions& o) {
  SamplerChain c(o.seed);
  if (o.repeat_penalty != 1.0f && o.repeat_last_n != 0) c.add_repetition_penalty(o.repeat_penalty, o.repeat_last_n);
  c.add_top_k(o.top_k).add_top_p(o.top_p).add_min_p(o.min_p).add_temperature(o.temperature);
  return c;
}

SamplerChain& SamplerChain::add_repetition_penalty(float penalty, int last_n) {
  stages_.push_back({Kind::kPenalty, penalty, last_n});
  return *this;
}
SamplerChain& SamplerChain::add_top_k(int k) {
  stages_.push_back({Kind::kTopK, 0, k});
  return *this;
}
SamplerChain& SamplerChain::add_top_p(float p) {
  stages_.push_back({Kind::kTopP, p, 0});
  return *this;
}
SamplerChain& SamplerChain::add_min_p(float p) {
  stages_.push_back({Kind::kMinP, p, 0});
  return *this;
}
SamplerChain& SamplerChain::add_temperature(float t) {
  stages_.push_back({Kind::kTemperature, t, 0});
  return *this;
}

void SamplerChain::accept(int32_t token) { history_.push_back(token); }

void SamplerChain::reset() {
  history_.clear();
  rng_.seed(seed_);
}

bool SamplerChain::plain_argmax() const {
  bool greedy = true;
  for (const Stage& st : stages_) {
    if (st.kind == Kind::kPenalty) return false;
    if (st.kind == Kind::kTemperature) greedy = st.value <= 0.0f;
  }
  return greedy;
}

int32_t SamplerChain::sample(std::span<const float> logits) {
  if (logits.empty()) return -1;
  if (plain_argmax()) return static_cast<int32_t>(math::argmax_row(logits.data(), std::ssize(logits)));
  // NaN logits never become candidates (a row of NaNs gives token 0, as the
  // argmax does).
  std::vector<Candidate>& c = cand_;
  c.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) c.push_back({logits[i], static_cast<int32_t>(i)});
  if (c.empty()) return 0;
  bool greedy = true;  // until a temperature > 0 says otherwise
  for (const Stage& st : stages_) {
    switch (st.kind) {
      case Kind::kPenalty: {
        // llama.cpp's rule: divide a positive logit, multiply a negative one.
        const size_t n = st.count < 0 ? history_.size() : std::min<size_t>(history_.size(), st.count);
        std::unordered_set<int32_t> recent(history_.end() - n, history_.end());
        for (Candidate& x : c)
          if (recent.count(x.id)) x.logit = x.logit > 0 ? x.logit / st.value : x.logit * st.value;
        break;
      }
      case Kind::kTopK:
        if (st.count > 0 && static_cast<size_t>(st.count) < c.size()) {
          std::partial_sort(c.begin(), c.begin() + st.count, c.end(),
                            [](const Candidate& a, const Candidate& b) { return ranks_before(a, b); });
          c.resize(st.count);
        }
        break;
      case Kind::kTopP: {
        if (st.value >= 1.0f) break;
        const std::vector<double> p = sorted_probs(c);
        double cum = 0;
        size_t keep = c.size();
        for (size_t i = 0; i < c.size(); ++i) {
          cum += p[i];
          if (cum >= st.value) {
            keep = i + 1;
            break;
          }
        }
        c.resize(std::max<size_t>(keep, 1));
        break;
      }
      case Kind::kMinP: {
        if (st.value <= 0.0f) break;
        const std::vector<double> p = sorted_probs(c);
        size_t keep = 1;
        while (keep < c.size() && p[keep] >= st.value * p[0]) ++keep;
        c.resize(keep);
        break;
      }
      case Kind::kTemperature:
        greedy = st.value <= 0.0f;
        if (!greedy)
          for (Candidate& x : c) x.logit /= st.value;
        break;
    }
  }
  if (greedy) {
    // Argmax; the lowest id wins a tie.
    return std::min_element(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
             return ranks_before(a, b);
           })->id;
  }
  const std::vector<double> p = sorted_probs(c);
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  double cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += p[i];
    if (u < cum) return c[i].id;
  }
  return c.back().id;
}

}  // namespace layerstream

// SamplerChain (layerstream/sampler.h): stages narrow and reshape a list of
// candidate tokens, then one draw from their softmax.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

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

SamplerChain::SamplerChain(uint64_t seed)
    : seed_(seed == kRandomSeed ? (uint64_t{std::random_device{}()} << 32 | std::random_device{}()) : seed),
      rng_(seed_) {}

SamplerChain SamplerChain::from(const SamplingOptions& o) {
  SamplerChain c(o.seed);
  if (!o.logit_bias.empty()) c.add_logit_bias(o.logit_bias);
  const bool penalties = o.repeat_penalty != 1.0f || o.presence_penalty != 0.0f || o.frequency_penalty != 0.0f;
  if (penalties && o.repeat_last_n != 0)
    c.add_penalties(o.repeat_penalty, o.presence_penalty, o.frequency_penalty, o.repeat_last_n);
  if (o.top_k > 0) c.add_top_k(o.top_k);
  if (o.typical_p < 1.0f) c.add_typical_p(o.typical_p);
  if (o.top_p < 1.0f) c.add_top_p(o.top_p);
  if (o.min_p > 0.0f) c.add_min_p(o.min_p);
  c.add_temperature(o.temperature);
  return c;
}

SamplerChain& SamplerChain::add_logit_bias(const std::map<int32_t, float>& bias) {
  stages_.push_back({.kind = Kind::kBias, .bias = bias});
  return *this;
}
SamplerChain& SamplerChain::add_repetition_penalty(float penalty, int last_n) {
  return add_penalties(penalty, 0.0f, 0.0f, last_n);
}
SamplerChain& SamplerChain::add_penalties(float repeat, float presence, float frequency, int last_n) {
  stages_.push_back(
      {.kind = Kind::kPenalty, .value = repeat, .count = last_n, .presence = presence, .frequency = frequency});
  return *this;
}
SamplerChain& SamplerChain::add_top_k(int k) {
  stages_.push_back({.kind = Kind::kTopK, .count = k});
  return *this;
}
SamplerChain& SamplerChain::add_typical_p(float p) {
  stages_.push_back({.kind = Kind::kTypicalP, .value = p});
  return *this;
}
SamplerChain& SamplerChain::add_top_p(float p) {
  stages_.push_back({.kind = Kind::kTopP, .value = p});
  return *this;
}
SamplerChain& SamplerChain::add_min_p(float p) {
  stages_.push_back({.kind = Kind::kMinP, .value = p});
  return *this;
}
SamplerChain& SamplerChain::add_temperature(float t) {
  stages_.push_back({.kind = Kind::kTemperature, .value = t});
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
    if (st.kind == Kind::kPenalty || st.kind == Kind::kBias) return false;
    if (st.kind == Kind::kTemperature) greedy = st.value <= 0.0f;
  }
  return greedy;
}

// llama.cpp's penalties over the last `count` accepted tokens: the
// repetition penalty divides a positive logit and multiplies a negative
// one; then logit -= count x frequency + presence.
void SamplerChain::apply_penalty(const Stage& st) {
  const size_t n = st.count < 0 ? history_.size() : std::min<size_t>(history_.size(), st.count);
  std::unordered_map<int32_t, int> counts;
  for (auto it = history_.end() - n; it != history_.end(); ++it) ++counts[*it];
  for (Candidate& x : cand_) {
    const auto it = counts.find(x.id);
    if (it == counts.end()) continue;
    x.logit = x.logit > 0 ? x.logit / st.value : x.logit * st.value;
    x.logit -= float(it->second) * st.frequency + st.presence;
  }
}

// Locally typical sampling as llama.cpp does it: rank tokens by how far
// their surprise (-log p) is from the entropy, keep the closest until their
// probability passes p.
void SamplerChain::apply_typical(float p) {
  const std::vector<double> prob = sorted_probs(cand_);
  double entropy = 0;
  for (double q : prob)
    if (q > 0) entropy -= q * std::log(q);
  std::vector<double> shift(prob.size());
  for (size_t i = 0; i < prob.size(); ++i) shift[i] = std::fabs(-std::log(prob[i]) - entropy);
  std::vector<size_t> order(prob.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return shift[a] < shift[b]; });
  size_t keep = order.size();
  double cum = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    cum += prob[order[i]];
    if (cum > p) {
      keep = i + 1;
      break;
    }
  }
  std::vector<Candidate> kept;
  for (size_t i = 0; i < keep; ++i) kept.push_back(cand_[order[i]]);
  cand_ = std::move(kept);
}

bool SamplerChain::apply_stages(std::span<const float> logits) {
  // NaN logits never become candidates (a row of NaNs gives token 0, as the
  // argmax does).
  std::vector<Candidate>& c = cand_;
  c.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) c.push_back({logits[i], static_cast<int32_t>(i)});
  if (c.empty()) return true;
  bool greedy = true;  // until a temperature > 0 says otherwise
  for (const Stage& st : stages_) {
    switch (st.kind) {
      case Kind::kBias:
        for (Candidate& x : c)
          if (auto it = st.bias.find(x.id); it != st.bias.end()) x.logit += it->second;
        // A banned token (-infinity) is no candidate, unless every one is.
        if (std::any_of(c.begin(), c.end(), [](const Candidate& x) { return std::isfinite(x.logit); }))
          std::erase_if(c, [](const Candidate& x) { return x.logit == -INFINITY; });
        break;
      case Kind::kPenalty:
        apply_penalty(st);
        break;
      case Kind::kTopK:
        if (st.count > 0 && static_cast<size_t>(st.count) < c.size()) {
          std::partial_sort(c.begin(), c.begin() + st.count, c.end(),
                            [](const Candidate& a, const Candidate& b) { return ranks_before(a, b); });
          c.resize(st.count);
        }
        break;
      case Kind::kTypicalP:
        if (st.value < 1.0f) apply_typical(st.value);
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
  return greedy;
}

std::vector<std::pair<int32_t, double>> SamplerChain::distribution(std::span<const float> logits) {
  if (logits.empty()) return {};
  const bool greedy = apply_stages(logits);
  if (cand_.empty()) return {{0, 1.0}};
  const std::vector<double> p = sorted_probs(cand_);
  if (greedy) return {{cand_[0].id, 1.0}};
  std::vector<std::pair<int32_t, double>> out;
  for (size_t i = 0; i < cand_.size(); ++i) out.emplace_back(cand_[i].id, p[i]);
  return out;
}

int32_t SamplerChain::sample(std::span<const float> logits) {
  if (logits.empty()) return -1;
  if (plain_argmax()) return static_cast<int32_t>(math::argmax_row(logits.data(), std::ssize(logits)));
  const bool greedy = apply_stages(logits);
  std::vector<Candidate>& c = cand_;
  if (c.empty()) return 0;
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

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int top_n) {
  double max = -INFINITY;
  for (float x : logits)
    if (!std::isnan(x)) max = std::max(max, double(x));
  double sum = 0;
  for (float x : logits)
    if (!std::isnan(x)) sum += std::exp(double(x) - max);
  const double log_z = max + std::log(sum);
  const auto logprob = [&](int32_t id) { return static_cast<float>(double(logits[id]) - log_z); };
  TokenLogprob out{token, logprob(token), {}};
  const size_t n = std::min<size_t>(std::max(top_n, 0), logits.size());
  if (n == 0) return out;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                    [&](int32_t a, int32_t b) { return math::ranks_before(logits[a], a, logits[b], b); });
  for (size_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], logprob(ids[i]));
  return out;
}

}  // namespace layerstream

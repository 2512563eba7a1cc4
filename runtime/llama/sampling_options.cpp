// validate_sampling (layerstream/sampler.h): the one check of sampling
// values, used by generate(), serve and the command line, so every caller
// refuses the same values with the same words.
#include <cmath>
#include <sstream>

#include "layerstream/sampler.h"

namespace layerstream {
namespace {

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

SamplingProblem problem(const char* field, double value, const char* want) {
  return {field, std::string(field) + " is " + number(value) + "; it must be " + want};
}

}  // namespace

std::optional<SamplingProblem> find_sampling_problem(const SamplingOptions& o, int n_vocab) {
  if (!(o.temperature >= 0.0f) || std::isinf(o.temperature))
    return problem("temperature", o.temperature, "a finite number >= 0 (0: greedy)");
  if (o.top_k < 0) return problem("top_k", o.top_k, ">= 0 (0: all tokens)");
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) return problem("top_p", o.top_p, "in (0, 1] (1: off)");
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) return problem("min_p", o.min_p, "in [0, 1] (0: off)");
  if (!(o.typical_p > 0.0f && o.typical_p <= 1.0f))
    return problem("typical_p", o.typical_p, "in (0, 1] (1: off)");
  if (!(o.repeat_penalty > 0.0f) || std::isinf(o.repeat_penalty))
    return problem("repeat_penalty", o.repeat_penalty, "a finite number > 0 (1: off)");
  if (o.repeat_last_n < -1)
    return problem("repeat_last_n", o.repeat_last_n, ">= -1 (0: no penalty window, -1: the whole history)");
  if (!std::isfinite(o.presence_penalty))
    return problem("presence_penalty", o.presence_penalty, "a finite number (0: off)");
  if (!std::isfinite(o.frequency_penalty))
    return problem("frequency_penalty", o.frequency_penalty, "a finite number (0: off)");
  for (const auto& [token, bias] : o.logit_bias) {
    if (token < 0 || (n_vocab > 0 && token >= n_vocab))
      return SamplingProblem{"logit_bias", "logit_bias names token " + std::to_string(token) +
                                               ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")"};
    if (std::isnan(bias) || bias == INFINITY)
      return SamplingProblem{"logit_bias", "logit_bias of token " + std::to_string(token) + " is " +
                                               number(bias) + "; it must be finite or -infinity (a ban)"};
  }
  return std::nullopt;
}

Status validate_sampling(const SamplingOptions& o, int n_vocab) {
  if (auto p = find_sampling_problem(o, n_vocab)) return Status::InvalidArgument(p->message);
  return Status::OK();
}

}  // namespace layerstream

#include "runtime/scheduler/expert_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <tuple>

#include "runtime/core/status_macros.h"

namespace layerstream::sched {
namespace {

double pick_prob(const ExpertLayerCost& c, uint32_t e) {
  return c.pick_prob.empty() ? static_cast<double>(c.used) / c.count : c.pick_prob[e];
}

// The layer's experts, most picked first (stable: equal ones by index).
std::vector<uint32_t> by_popularity(const ExpertLayerCost& c) {
  std::vector<uint32_t> order(c.count);
  std::iota(order.begin(), order.end(), 0u);
  if (!c.pick_prob.empty())
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return c.pick_prob[a] > c.pick_prob[b]; });
  return order;
}

double rest_hit_s(const ExpertLayerCost& c, ExpertRest rest) {
  return rest == ExpertRest::kHost ? c.host_s : c.link_s + c.device_s;
}

}  // namespace

const char* expert_rest_name(ExpertRest rest) { return rest == ExpertRest::kHost ? "host" : "fetched"; }

double expert_hit_probability(double q, int tokens) {
  if (q <= 0) return 0;
  if (q >= 1) return 1;
  return -std::expm1(tokens * std::log1p(-q));  // 1 - (1 - q)^tokens, accurate for small q
}

double uniform_tokens_per_hit(uint32_t count, uint32_t used, int tokens) {
  if (count == 0) return 1;
  const double q = static_cast<double>(used) / count;
  const double p = expert_hit_probability(q, tokens);
  return p > 0 ? std::max(1.0, tokens * q / p) : 1.0;
}

ExpertRest cheaper_rest(const ExpertLayerCost& c) {
  return c.host_s >= 0 && c.host_s <= c.link_s + c.device_s ? ExpertRest::kHost : ExpertRest::kFetched;
}

double expert_layer_seconds(const ExpertLayerCost& c, const ExpertLayerPlacement& p, int tokens) {
  LS_CHECK(c.pick_prob.empty() || c.pick_prob.size() == c.count);
  LS_CHECK(p.rest != ExpertRest::kHost || p.resident >= c.count || c.host_s >= 0);
  const std::vector<uint32_t> order = by_popularity(c);
  double s = c.dense_s, no_host_hit = 1;
  for (uint32_t k = 0; k < c.count; ++k) {
    const double hit = expert_hit_probability(pick_prob(c, order[k]), tokens);
    if (k < p.resident) {
      s += hit * c.device_s;
    } else {
      s += hit * rest_hit_s(c, p.rest);
      if (p.rest == ExpertRest::kHost) no_host_hit *= 1 - hit;
    }
  }
  return s + (1 - no_host_hit) * c.crossing_s;
}

double expert_layer_fetch_bytes(const ExpertLayerCost& c, const ExpertLayerPlacement& p, int tokens) {
  if (p.rest != ExpertRest::kFetched) return 0;
  const std::vector<uint32_t> order = by_popularity(c);
  double hits = 0;
  for (uint32_t k = p.resident; k < c.count; ++k) hits += expert_hit_probability(pick_prob(c, order[k]), tokens);
  return hits * static_cast<double>(c.expert_bytes);
}

uint32_t ExpertPlan::min_resident() const {
  uint32_t m = layers.empty() ? 0 : layers.front().resident;
  for (const ExpertLayerPlacement& l : layers) m = std::min(m, l.resident);
  return m;
}

uint32_t ExpertPlan::max_resident() const {
  uint32_t m = 0;
  for (const ExpertLayerPlacement& l : layers) m = std::max(m, l.resident);
  return m;
}

uint64_t ExpertPlan::total_resident() const {
  uint64_t n = 0;
  for (const ExpertLayerPlacement& l : layers) n += l.resident;
  return n;
}

ExpertPlan evaluate_experts(const std::vector<ExpertLayerCost>& costs, const std::vector<ExpertLayerPlacement>& placement,
                            int tokens, double other_s, bool keep_rests) {
  LS_CHECK(costs.size() == placement.size());
  ExpertPlan plan;
  plan.pass_s = other_s;
  for (size_t i = 0; i < costs.size(); ++i) {
    ExpertLayerPlacement p = placement[i];
    p.resident = std::min(p.resident, costs[i].count);
    if (!keep_rests) p.rest = cheaper_rest(costs[i]);
    plan.pass_s += expert_layer_seconds(costs[i], p, tokens);
    plan.fetch_bytes += expert_layer_fetch_bytes(costs[i], p, tokens);
    plan.resident_bytes += uint64_t{p.resident} * costs[i].expert_bytes;
    plan.layers.push_back(p);
  }
  return plan;
}

namespace {

// The best next step of one layer from `from` resident experts: the count
// `to` (> from) that saves the most seconds per added expert, and the
// seconds saved. `seconds[k]`: the layer's pass with k resident.
struct Step {
  uint32_t to = 0;
  double saved = 0;
};
Step best_step(const std::vector<double>& seconds, uint32_t from) {
  Step best;
  double best_rate = 0;
  for (uint32_t k = from + 1; k < seconds.size(); ++k) {
    const double saved = seconds[from] - seconds[k], rate = saved / (k - from);
    if (rate > best_rate * (1 + 1e-12)) best = {k, saved}, best_rate = rate;  // ties: the smaller step
  }
  return best;
}

// The count in (from, from + fits] that saves the most (from when none saves).
uint32_t best_within(const std::vector<double>& seconds, uint32_t from, uint64_t fits) {
  uint32_t best = from;
  for (uint64_t k = from + 1; k < seconds.size() && k - from <= fits; ++k)
    if (seconds[k] < seconds[best]) best = static_cast<uint32_t>(k);
  return best;
}

// Improves a placement pair by pair: for each two layers, the best split of
// their resident bytes and what is left over between them (every count of
// one, the best count of the other that fits), until no pair improves.
// `prefix_best[i][k]`: the count <= k with layer i's least seconds.
void refine_pairs(const std::vector<ExpertLayerCost>& costs, const std::vector<std::vector<double>>& seconds,
                  std::vector<ExpertLayerPlacement>& placement, uint64_t& left) {
  const size_t n = costs.size();
  std::vector<std::vector<uint32_t>> prefix_best(n);
  for (size_t i = 0; i < n; ++i) {
    prefix_best[i].resize(seconds[i].size());
    for (uint32_t k = 0; k < seconds[i].size(); ++k)
      prefix_best[i][k] = k > 0 && seconds[i][prefix_best[i][k - 1]] <= seconds[i][k] ? prefix_best[i][k - 1] : k;
  }
  for (int round = 0; round < 4; ++round) {
    bool improved = false;
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) {
        const uint64_t ea = costs[a].expert_bytes, eb = costs[b].expert_bytes;
        if (a == b || ea == 0 || eb == 0) continue;
        const uint64_t room = placement[a].resident * ea + placement[b].resident * eb + left;
        const double now = seconds[a][placement[a].resident] + seconds[b][placement[b].resident];
        double best = now;
        uint32_t best_a = placement[a].resident, best_b = placement[b].resident;
        for (uint32_t ka = 0; ka < seconds[a].size() && uint64_t{ka} * ea <= room; ++ka) {
          const uint64_t kb_max = std::min<uint64_t>(costs[b].count, (room - uint64_t{ka} * ea) / eb);
          const uint32_t kb = prefix_best[b][kb_max];
          if (seconds[a][ka] + seconds[b][kb] < best * (1 - 1e-12)) best = seconds[a][ka] + seconds[b][kb], best_a = ka, best_b = kb;
        }
        if (best < now) {
          placement[a].resident = best_a;
          placement[b].resident = best_b;
          left = room - uint64_t{best_a} * ea - uint64_t{best_b} * eb;
          improved = true;
        }
      }
    }
    if (!improved) return;
  }
}

}  // namespace

ExpertPlan plan_resident_experts(const std::vector<ExpertLayerCost>& costs, uint64_t budget, int tokens,
                                 double other_s) {
  const size_t n = costs.size();
  std::vector<ExpertLayerPlacement> placement(n);
  // seconds[i][k]: layer i's expected pass with its k most-picked experts resident.
  std::vector<std::vector<double>> seconds(n);
  for (size_t i = 0; i < n; ++i) {
    placement[i].rest = cheaper_rest(costs[i]);
    for (uint32_t k = 0; k <= costs[i].count; ++k)
      seconds[i].push_back(expert_layer_seconds(costs[i], {k, placement[i].rest}, tokens));
  }
  // Steps along each layer's lower convex hull, best seconds saved per byte
  // first (ties: the layer with fewer resident, then the lower layer): the
  // hull makes a step that pays only when whole (the activations' round trip
  // saved once no expert of the layer is left on the host) one candidate.
  using Candidate = std::tuple<double, int64_t, int64_t>;
  std::priority_queue<Candidate> queue;
  auto push_next = [&](size_t i) {
    if (costs[i].expert_bytes == 0) return;
    const Step st = best_step(seconds[i], placement[i].resident);
    if (st.saved <= 0) return;
    const double bytes = static_cast<double>(st.to - placement[i].resident) * static_cast<double>(costs[i].expert_bytes);
    queue.emplace(st.saved / bytes, -int64_t{placement[i].resident}, -static_cast<int64_t>(i));
  };
  for (size_t i = 0; i < n; ++i) push_next(i);
  uint64_t left = budget;
  while (!queue.empty()) {
    const size_t i = static_cast<size_t>(-std::get<2>(queue.top()));
    queue.pop();
    const uint32_t from = placement[i].resident, to = best_step(seconds[i], from).to;
    const uint64_t eb = costs[i].expert_bytes;
    if (uint64_t{to - from} * eb <= left) {
      placement[i].resident = to;
      left -= uint64_t{to - from} * eb;
      push_next(i);
      continue;
    }
    // The step does not fit whole: the best part of it that does, and the
    // layer is done (smaller steps of other layers may still fit).
    placement[i].resident = best_within(seconds[i], from, left / eb);
    left -= uint64_t{placement[i].resident - from} * eb;
  }
  refine_pairs(costs, seconds, placement, left);
  return evaluate_experts(costs, placement, tokens, other_s, /*keep_rests=*/true);
}

ExpertPlan n_cpu_moe_plan(const std::vector<ExpertLayerCost>& costs, int n, int tokens, double other_s) {
  LS_CHECK(n >= 0 && static_cast<size_t>(n) <= costs.size());
  std::vector<ExpertLayerPlacement> placement(costs.size());
  for (size_t i = 0; i < costs.size(); ++i) {
    if (static_cast<int>(i) < n) {
      placement[i].resident = 0;
      placement[i].rest = tokens >= kLlamaCppOpOffloadMinBatch ? ExpertRest::kFetched : ExpertRest::kHost;
    } else {
      placement[i].resident = costs[i].count;
    }
  }
  return evaluate_experts(costs, placement, tokens, other_s, /*keep_rests=*/true);
}

int smallest_n_cpu_moe(const std::vector<ExpertLayerCost>& costs, uint64_t budget) {
  uint64_t resident = 0;
  for (const ExpertLayerCost& c : costs) resident += uint64_t{c.count} * c.expert_bytes;
  int n = 0;
  for (; n < static_cast<int>(costs.size()) && resident > budget; ++n)
    resident -= uint64_t{costs[n].count} * costs[n].expert_bytes;
  return n;
}

}  // namespace layerstream::sched

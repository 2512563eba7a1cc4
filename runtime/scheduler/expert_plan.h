// Experts as placement units in the cost model: the rule for what a pass of a
// mixture-of-experts model costs when each layer keeps some experts resident
// on the device and computes the rest on the host from RAM (as llama.cpp's
// --n-cpu-moe does) or fetches them to the device when the router picks them,
// and the choice of how many experts per layer are resident for a budget.
//
// The rule (one place for it; `plan` and its tests use it):
// - A token picks expert e of a layer with probability q_e (the layer's
//   measured routing frequency; uniform before any is measured: q = used /
//   count). A pass of b tokens hits e with probability 1 - (1 - q_e)^b, and
//   each hit carries b x q_e / that probability tokens on average.
// - A layer's pass = its dense part (attention, router, norms, on the device)
//   + for each expert, P(hit) x the seconds of one hit on its site: resident
//   at device speed, on the host at the host's rate, fetched at link speed
//   plus device speed; plus the activations' round trip to the host when any
//   host expert is hit. Sites are summed, not overlapped (as llama.cpp runs
//   them: the host experts of a layer after the device's), so the figure is
//   an expected pass, conservative where an engine overlaps the two lanes.
// - Experts are independent between layers and passes (no cache history).
// Units: seconds, bytes. Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace layerstream::sched {

// Where a layer's experts that are not resident are computed.
enum class ExpertRest { kHost, kFetched };
const char* expert_rest_name(ExpertRest rest);  // "host", "fetched"

// One mixture-of-experts layer's costs for one pass size (`tokens` tokens).
struct ExpertLayerCost {
  uint32_t count = 0, used = 0;  // experts, experts a token picks
  uint64_t expert_bytes = 0;     // one expert's matrices (its gate, up and down slices)
  double dense_s = 0;            // the layer without its experts, on the device
  // Seconds of one expert hit (by the tokens a hit carries) on each site.
  double device_s = 0;           // resident: computed on the device
  double host_s = -1;            // on the host from RAM; < 0: no host site (no host figures)
  double link_s = 0;             // moving one expert to the device (a fetched hit: link_s + device_s)
  double crossing_s = 0;         // the activations to the host and back, once per pass with a host hit
  // Per expert, the chance that one token picks it (sums to `used`); empty:
  // uniform, used / count each. Resident experts are the most picked.
  std::vector<double> pick_prob;
};

// 1 - (1 - q)^tokens: the chance a pass of `tokens` tokens hits an expert a
// token picks with probability q.
double expert_hit_probability(double pick_prob, int tokens);
// Expected tokens one hit carries under uniform routing (>= 1).
double uniform_tokens_per_hit(uint32_t count, uint32_t used, int tokens);

// The cheaper site for a layer's non-resident experts: the host when it has
// one and a hit costs no more there than fetched.
ExpertRest cheaper_rest(const ExpertLayerCost& c);

// One layer's placement: its `resident` most-picked experts on the device,
// the rest on `rest`.
struct ExpertLayerPlacement {
  uint32_t resident = 0;
  ExpertRest rest = ExpertRest::kHost;
};

// Expected seconds of one pass of `tokens` tokens through the layer.
double expert_layer_seconds(const ExpertLayerCost& c, const ExpertLayerPlacement& p, int tokens);
// Expected bytes moved over the link per pass (fetched hits).
double expert_layer_fetch_bytes(const ExpertLayerCost& c, const ExpertLayerPlacement& p, int tokens);

struct ExpertPlan {
  std::vector<ExpertLayerPlacement> layers;  // as the costs given
  uint64_t resident_bytes = 0;               // every resident expert's bytes
  double pass_s = 0;                         // other_s + every layer's expected seconds
  double fetch_bytes = 0;                    // expected link bytes per pass
  uint32_t min_resident() const;
  uint32_t max_resident() const;
  uint64_t total_resident() const;
};

// The same placement's pass with another pass size's costs (`costs` in the
// same layer order as `placement`), e.g. prefill of a decode-chosen plan;
// each layer's rest is the cheaper one for these costs unless `keep_rests`.
ExpertPlan evaluate_experts(const std::vector<ExpertLayerCost>& costs, const std::vector<ExpertLayerPlacement>& placement,
                            int tokens, double other_s, bool keep_rests = false);

// How many experts of each layer are resident within `budget` bytes (each
// layer's most picked), the rest of each layer on its cheaper site: greedily
// the step along a layer's lower convex hull of expected seconds against
// resident experts that saves the most per byte (a layer's round trip to the
// host is saved only once all its experts are resident, so filling a layer
// can pay more than spreading), then improved pair by pair (the best split
// of two layers' bytes and what is left). Exact for two layers; for more, a
// local optimum. `other_s`: the pass's layers that
// are not experts (dense parts are in the costs; this is the head and dense
// layers).
ExpertPlan plan_resident_experts(const std::vector<ExpertLayerCost>& costs, uint64_t budget, int tokens,
                                 double other_s);

// llama.cpp's --n-cpu-moe N: every expert of the first N layers on the host
// (computed there, or, for batches of at least llama.cpp's op-offload
// minimum of 32 tokens, copied to the device as its scheduler does), every
// other expert resident. REQUIRES 0 <= n <= costs.size() and host sites.
ExpertPlan n_cpu_moe_plan(const std::vector<ExpertLayerCost>& costs, int n, int tokens, double other_s);
constexpr int kLlamaCppOpOffloadMinBatch = 32;
// The smallest N whose resident experts fit in `budget` bytes (costs.size()
// when none but "no expert resident" does).
int smallest_n_cpu_moe(const std::vector<ExpertLayerCost>& costs, uint64_t budget);

}  // namespace layerstream::sched

#include "runtime/planning/expert_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "layerstream/units.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/expert_plan.h"
#include "runtime/scheduler/plan.h"

namespace layerstream::planning {
namespace {

using Matmul = llama::RunnerFootprint::Matmul;

// One pass size's costs: the MoE layers' (in layer order) and the seconds of
// the layers without experts (the head, dense blocks), all on the device.
struct PassCosts {
  std::vector<sched::ExpertLayerCost> moe;
  double other_s = 0;
};

// A layer's bytes without its experts: what stays resident on the device.
uint64_t dense_part_bytes(const sched::LayerSpec& layer, const llama::RunnerFootprint::Experts& ex) {
  const uint64_t experts = uint64_t{ex.count} * ex.bytes();
  return layer.bytes > experts ? layer.bytes - experts : 0;
}

PassCosts pass_costs(const ExpertRowInputs& in, int cls, int tokens) {
  const llama::RunnerFootprint& fp = *in.footprint;
  PassCosts out;
  for (size_t i = 0; i < fp.layers.size(); ++i) {
    const llama::RunnerFootprint::Experts& ex = fp.experts[i];
    const double compute = in.cost->compute_s(static_cast<int>(i), cls);
    if (ex.count == 0) {
      out.other_s += compute;
      continue;
    }
    sched::ExpertLayerCost c;
    c.count = ex.count;
    c.used = ex.used;
    c.expert_bytes = ex.bytes();
    // The cost model's compute counts the experts as layer_matmul_seconds
    // does; what is left is the dense part (with any probe correction).
    c.dense_s = std::max(0.0, compute - expected_experts_seconds(ex, tokens, in.device));
    const int per_hit = static_cast<int>(std::ceil(sched::uniform_tokens_per_hit(ex.count, ex.used, tokens) - 1e-9));
    c.device_s = 0;
    for (const Matmul& m : ex.one) c.device_s += in.device(m, per_hit);
    if (in.host) {
      c.host_s = 0;
      for (const Matmul& m : ex.one) c.host_s += in.host(m, per_hit);
    }
    c.link_s = in.cost->link_s(c.expert_bytes);
    const uint64_t activations = static_cast<uint64_t>(tokens) * static_cast<uint64_t>(ex.one.front().n_in) * 4;
    c.crossing_s = 2 * (in.cost->link_s(activations) + in.crossing_latency_s);
    out.moe.push_back(c);
  }
  return out;
}

// "host", "fetched" or "host+fetched": where the non-resident experts run.
std::string rest_sites(const sched::ExpertPlan& p, const std::vector<sched::ExpertLayerCost>& costs) {
  bool host = false, fetched = false;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (p.layers[i].resident >= costs[i].count) continue;
    (p.layers[i].rest == sched::ExpertRest::kHost ? host : fetched) = true;
  }
  return host && fetched ? "host+fetched" : host ? "host" : fetched ? "fetched" : "";
}

// Fetched experts land in two buffers (one computing, one loading) of what a
// decode pass picks in a layer at most: min(count, used x sequences) of the
// largest layer's experts. A prefill pass fetches its experts through them in
// turns (its time is the bytes over the link either way).
uint64_t fetch_buffer_bytes(const llama::RunnerFootprint& fp) {
  uint64_t most = 0;
  for (const auto& ex : fp.experts) {
    const uint64_t picked = std::min<uint64_t>(ex.count, uint64_t{ex.used} * static_cast<uint64_t>(fp.n_seq));
    most = std::max(most, picked * ex.bytes());
  }
  return 2 * most;
}

// llama.cpp's --n-cpu-moe equivalent: the smallest N that fits, and its speed.
void fill_n_cpu_moe(const ExpertRowInputs& in, const PassCosts& dec, const PassCosts& pre, uint64_t expert_budget,
                    ExpertBudgetPlan& row) {
  if (!in.host) return;
  const llama::RunnerFootprint& fp = *in.footprint;
  row.n_cpu_moe = sched::smallest_n_cpu_moe(dec.moe, expert_budget);
  const sched::ExpertPlan d = sched::n_cpu_moe_plan(dec.moe, row.n_cpu_moe, fp.n_seq, dec.other_s);
  row.n_cpu_moe_decode_tokens_per_s = d.pass_s > 0 ? fp.n_seq / d.pass_s : 0;
  if (in.prefill_rates) {
    const sched::ExpertPlan p = sched::n_cpu_moe_plan(pre.moe, row.n_cpu_moe, fp.max_pass_tokens, pre.other_s);
    row.n_cpu_moe_prefill_tokens_per_s = p.pass_s > 0 ? fp.max_pass_tokens / p.pass_s : 0;
  }
}

// KV + activations + every dense part, each rounded as the arena places it.
uint64_t expert_min_vram(const llama::RunnerFootprint& fp) {
  uint64_t fixed = sched::round_up(fp.reserve.total(), sched::kSlotAlignment);
  for (size_t i = 0; i < fp.layers.size(); ++i)
    fixed += sched::round_up(dense_part_bytes(fp.layers[i], fp.experts[i]), sched::kSlotAlignment);
  return fixed;
}

// The decode placement within `expert_budget` and its row figures.
void fill_placement(const ExpertRowInputs& in, const PassCosts& dec, const PassCosts& pre, uint64_t expert_budget,
                    ExpertBudgetPlan& row) {
  const llama::RunnerFootprint& fp = *in.footprint;
  const sched::ExpertPlan d = sched::plan_resident_experts(dec.moe, expert_budget, fp.n_seq, dec.other_s);
  row.fits = true;
  row.resident_min = static_cast<int>(d.min_resident());
  row.resident_max = static_cast<int>(d.max_resident());
  row.resident_total = d.total_resident();
  row.resident_bytes = d.resident_bytes;
  row.rest = rest_sites(d, dec.moe);
  row.decode_tokens_per_s = d.pass_s > 0 ? fp.n_seq / d.pass_s : 0;
  row.decode_fetch_bytes_per_token = d.fetch_bytes / fp.n_seq;
  row.prefill_tokens_per_s = 0;
  if (in.prefill_rates) {
    const sched::ExpertPlan p = sched::evaluate_experts(pre.moe, d.layers, fp.max_pass_tokens, pre.other_s);
    row.prefill_tokens_per_s = p.pass_s > 0 ? fp.max_pass_tokens / p.pass_s : 0;
  }
}

}  // namespace

double expected_experts_seconds(const llama::RunnerFootprint::Experts& ex, int tokens, const MatmulSeconds& site) {
  if (ex.count == 0) return 0;
  const double hits = ex.count * sched::expert_hit_probability(static_cast<double>(ex.used) / ex.count, tokens);
  const int per_hit = static_cast<int>(std::ceil(sched::uniform_tokens_per_hit(ex.count, ex.used, tokens) - 1e-9));
  double one = 0;
  for (const Matmul& m : ex.one) one += site(m, per_hit);
  return hits * one;
}

double layer_matmul_seconds(const llama::RunnerFootprint& fp, size_t layer, int tokens, const MatmulSeconds& site) {
  const std::vector<Matmul>& mats = fp.matmuls[layer];
  const llama::RunnerFootprint::Experts* ex = layer < fp.experts.size() ? &fp.experts[layer] : nullptr;
  const size_t dense = ex && ex->count > 0 ? mats.size() - std::min(mats.size(), ex->one.size()) : mats.size();
  double s = 0;
  for (size_t j = 0; j < dense; ++j) s += site(mats[j], tokens);
  return s + (ex ? expected_experts_seconds(*ex, tokens, site) : 0);
}

bool describe_experts(MemoryPlan& plan, const llama::RunnerFootprint& fp) {
  if (fp.experts.size() != fp.layers.size()) return false;  // a footprint made without experts
  bool any = false;
  for (size_t i = 0; i < fp.layers.size(); ++i) {
    const auto& ex = fp.experts[i];
    plan.dense_bytes += dense_part_bytes(fp.layers[i], ex);
    if (ex.count == 0) continue;
    any = true;
    ++plan.moe_layers;
    plan.experts = static_cast<int>(ex.count);
    plan.experts_used = static_cast<int>(ex.used);
    plan.expert_bytes = std::max(plan.expert_bytes, ex.bytes());
    plan.all_experts_bytes += uint64_t{ex.count} * ex.bytes();
    plan.active_expert_bytes_per_token += uint64_t{ex.used} * ex.bytes();
  }
  if (!any) {
    plan.dense_bytes = 0;
    return false;
  }
  plan.expert_min_vram_bytes = expert_min_vram(fp);
  return true;
}

ExpertBudgetPlan plan_expert_budget(const ExpertRowInputs& in, uint64_t budget) {
  const llama::RunnerFootprint& fp = *in.footprint;
  ExpertBudgetPlan row;
  const uint64_t fixed = expert_min_vram(fp);
  if (budget < fixed) {
    row.note = "KV + activations and every dense part need " + format_bytes(fixed);
    return row;
  }
  const PassCosts dec = pass_costs(in, in.decode_cls, fp.n_seq);
  const PassCosts pre = pass_costs(in, in.prefill_cls, fp.max_pass_tokens);
  uint64_t all_experts = 0;
  bool fetch_wanted = false;
  for (size_t i = 0; i < dec.moe.size(); ++i) {
    all_experts += uint64_t{dec.moe[i].count} * dec.moe[i].expert_bytes;
    fetch_wanted |= sched::cheaper_rest(dec.moe[i]) == sched::ExpertRest::kFetched ||
                    sched::cheaper_rest(pre.moe[i]) == sched::ExpertRest::kFetched;
  }
  const uint64_t expert_budget = budget - fixed, buffers = fetch_buffer_bytes(fp);
  if (all_experts <= expert_budget || !fetch_wanted) {
    fill_placement(in, dec, pre, expert_budget, row);  // every expert resident, or the rest on the host
  } else {
    // Fetching needs its buffers (two decode passes' picks: small beside
    // the experts); without room for them, and with a host site, the rest
    // runs on the host (prefill too).
    if (expert_budget >= buffers) {
      fill_placement(in, dec, pre, expert_budget - buffers, row);
    } else if (in.host) {
      PassCosts host_dec = dec, host_pre = pre;
      for (PassCosts* pc : {&host_dec, &host_pre})
        for (sched::ExpertLayerCost& c : pc->moe) c.link_s = std::numeric_limits<double>::infinity();
      fill_placement(in, host_dec, host_pre, expert_budget, row);
    }
    if (!row.fits) {
      row.note = "KV + activations, every dense part and the fetch buffers need " + format_bytes(fixed + buffers);
      return row;
    }
  }
  fill_n_cpu_moe(in, dec, pre, expert_budget, row);
  return row;
}

}  // namespace layerstream::planning

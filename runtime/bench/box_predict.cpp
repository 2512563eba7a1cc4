#include "runtime/bench/box_predict.h"

#include <fmt/format.h>

#include <algorithm>

#include "layerstream/units.h"
#include "runtime/planning/expert_rows.h"
#include "runtime/planning/runner_executor_view.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/cost_model.h"
#include "runtime/scheduler/planner.h"
#include "runtime/scheduler/planner_input.h"

namespace layerstream::bench {
using planning::BoxFigures;
using planning::matmul_seconds;
using planning::RateTable;
using planning::runner_executor_view;

namespace {

// Seconds of layer i's matmuls for `tokens` tokens on a rate table (a
// mixture of experts' experts counted as expert_rows.h counts them).
double layer_seconds(const llama::RunnerFootprint& fp, int i, const RateTable& r, int tokens,
                     double decode_fallback_gbps) {
  return planning::layer_matmul_seconds(fp, static_cast<size_t>(i), tokens,
                                        [&](const llama::RunnerFootprint::Matmul& m, int t) {
                                          return matmul_seconds(r, m.type, m.n_out, m.n_in, m.bytes, t,
                                                                decode_fallback_gbps);
                                        });
}

// The runner's footprint on the profile's backend (without CUDA here, the
// host kernels size the scratch: a few MiB of the reserve).
Result<llama::RunnerFootprint> prediction_footprint(const GgufFile& file, const llama::RunnerOptions& ro,
                                                    BackendKind backend) {
  auto fpr = llama::LlamaRunner::footprint(file, ro, backend);
  if (!fpr.ok() && backend == BackendKind::kCuda) {
    LS_LOG_INFO("predict: sizing the reserve with the host kernels ({})", fpr.status().message());
    fpr = llama::LlamaRunner::footprint(file, ro, BackendKind::kHost);
  }
  return fpr;
}

// What the prediction is of: the box, the model, the budgets, the workload.
BoxPrediction describe_prediction(const BoxFigures& box, const GgufFile& file, const PredictOptions& o,
                                  const llama::RunnerOptions& ro, const llama::RunnerFootprint& fp) {
  BoxPrediction out;
  out.box_source = box.source;
  out.box_backend = box.backend;
  out.box_device = box.device_name;
  out.link_gbps = o.link_gbps > 0 ? o.link_gbps : box.link_gbps;
  out.disk_gbps = box.disk_gbps;
  out.ram_read_gbps = box.ram_read_gbps;
  out.host_threads = box.host_threads;
  out.host_figures = box.has_host();
  out.model = file.path();
  out.layers = static_cast<int>(fp.layers.size());
  for (const auto& l : fp.layers) {
    out.weight_bytes += l.bytes;
    out.layer_names.push_back(l.name);
    out.layer_bytes.push_back(l.bytes);
  }
  out.reserve_bytes = fp.reserve.total();
  out.vram_budget = ro.vram_budget;
  out.ram_budget = ro.ram_budget;
  out.mode = o.work.mode == BenchMode::kDecode ? "decode" : "prefill";
  out.tokens_per_pass = o.work.tokens;
  return out;
}

// The cost model of this pass size, from the profile; sets out.host_factor.
sched::CostModel prediction_cost(const BoxFigures& box, const PredictOptions& o, const llama::RunnerFootprint& fp,
                                 BackendKind backend, BoxPrediction& out) {
  const int n = static_cast<int>(fp.layers.size());
  const int tokens = o.work.tokens;
  const int cls = sched::batch_class(tokens);
  const bool decode = o.work.mode == BenchMode::kDecode;
  sched::CostModel cost(n);
  const RateTable& dev_rates = box.device_rates();
  int64_t hidden = 0;
  double sum_dev = 0, sum_host = 0;
  for (int i = 0; i < n; ++i) {
    // A prefill pass computes logits for the last token of its sequence only.
    const int t = i == fp.head_layer && !decode ? 1 : tokens;
    const double dev_s = layer_seconds(fp, i, dev_rates, t, 0);
    cost.record_compute(i, cls, dev_s);
    if (box.has_host()) {
      const double host_s = layer_seconds(fp, i, box.host, t, box.ram_read_gbps);
      cost.record_host_compute(i, cls, host_s);
      if (i != fp.head_layer) sum_dev += dev_s, sum_host += host_s;
    }
    if (hidden == 0 && !fp.matmuls[i].empty()) hidden = fp.matmuls[i].front().n_in;
  }
  out.host_factor = sum_dev > 0 ? sum_host / sum_dev : 0;
  cost.set_shared_compute(backend == BackendKind::kHost);  // split halves share the cores (as the executor says)
  cost.set_link_bw(out.link_gbps * 1e9);
  cost.set_disk_bw(box.disk_gbps * 1e9);
  if (out.link_gbps > 0)
    cost.set_crossing_s(cls, static_cast<double>(tokens) * hidden * 4 / (out.link_gbps * 1e9) +
                                 (backend == BackendKind::kCuda ? 10e-6 : 0));
  return cost;
}

// The plan the strategy's executor would make (or is given) and its figures;
// the reason when the strategy does not run at these budgets.
StrategyPrediction predict_strategy(const std::string& name, llama::Strategy strategy, const BoxFigures& box,
                                    const llama::RunnerOptions& ro, const llama::RunnerFootprint& fp,
                                    const sched::CostModel& cost, int tokens, BackendKind backend) {
  StrategyPrediction sp;
  sp.name = name;
  llama::RunnerOptions so = ro;
  so.strategy = strategy;
  if (strategy == llama::Strategy::kHost && !box.has_host() && backend != BackendKind::kHost) {
    sp.error = "the profile has no host figures (\"host\": RAM bandwidth, CPU matmul rates), so the host site "
               "cannot be predicted (probe it again, or add them: docs/BOX_PROFILE.md)";
    return sp;
  }
  const int cls = sched::batch_class(tokens);
  const DeviceInfo device = sched::device_info_for(backend);
  auto view = runner_executor_view(fp, so, device);
  Result<sched::Plan> plan = view.ok() ? Result<sched::Plan>(sched::Plan{}) : Result<sched::Plan>(view.status());
  if (view.ok()) {
    sched::CostModel c = cost;
    // The profile's host rates are the host costs (prediction_cost); the
    // factor covers what they leave out, as in the executor.
    c.set_host_factor(sched::host_factor_before_measurement(view->options, device));
    const sched::PlannerInput in = view->planner_input(c, cls);
    if (view->options.plan) {
      sched::Plan p = *view->options.plan;
      p.batch_class = cls;
      sched::evaluate_plan(in, p);
      plan = p;
    } else {
      plan = sched::make_plan(in);
    }
  }
  if (!plan.ok()) {
    sp.error = plan.status().message();
    return sp;
  }
  sp.plan = *plan;
  sp.pass_s = plan->predicted_pass_s;
  sp.lower_bound_s = plan->lower_bound_s;
  sp.tokens_per_s = sp.pass_s > 0 ? tokens / sp.pass_s : 0;
  sp.host = plan->count_site(sched::Site::kHost);
  sp.split = plan->count_site(sched::Site::kSplit);
  for (int i = 0; i < static_cast<int>(plan->tiers.size()); ++i) {
    if (plan->site(i) != sched::Site::kDevice) continue;
    if (plan->tiers[i] == sched::Tier::kResident) ++sp.resident;
    else ++sp.streamed;
  }
  sp.sites = sched::site_map(*plan);
  return sp;
}

}  // namespace

Result<BoxPrediction> predict_with_box(const BoxFigures& box, const GgufFile& file, const PredictOptions& o) {
  if (o.work.tokens < 1) return Status::InvalidArgument("predict: tokens per pass must be >= 1");
  const llama::RunnerOptions ro = workload_runner_options(o.runner, o.work);
  const BackendKind backend = box.backend == "cuda" ? BackendKind::kCuda : BackendKind::kHost;
  LS_ASSIGN_OR_RETURN(const llama::RunnerFootprint fp, prediction_footprint(file, ro, backend));
  BoxPrediction out = describe_prediction(box, file, o, ro, fp);
  const sched::CostModel cost = prediction_cost(box, o, fp, backend, out);
  for (const std::string& name : o.strategies) {
    LS_ASSIGN_OR_RETURN(llama::Strategy strategy, llama::parse_strategy(name));
    out.strategies.push_back(predict_strategy(name, strategy, box, ro, fp, cost, o.work.tokens, backend));
  }
  return out;
}

std::string format_prediction(const BoxPrediction& p, const std::map<std::string, double>& measured) {
  std::string o;
  o += fmt::format("prediction from {} ({} backend: {}; link {:.2f} GB/s, disk {:.2f} GB/s", p.box_source,
                   p.box_backend, p.box_device, p.link_gbps, p.disk_gbps);
  if (p.host_figures)
    o += fmt::format(", host {} threads, RAM read {:.2f} GB/s; host/device compute {:.2f}x)\n", p.host_threads,
                     p.ram_read_gbps, p.host_factor);
  else
    o += ", no host figures: the host site is never chosen)\n";
  o += fmt::format("model {}: {} layers, {} of weights; VRAM budget {} (reserve {}), RAM budget {}; {}, {} token(s) "
                   "per pass\n",
                   p.model, p.layers, format_bytes(p.weight_bytes), format_bytes(p.vram_budget),
                   format_bytes(p.reserve_bytes), format_bytes(p.ram_budget), p.mode, p.tokens_per_pass);
  const bool m = !measured.empty();
  o += fmt::format("  {:<9} {:>12} {:>10} {:>11} {:>9} {:>9} {:>5} {:>6} {:>6}{}\n", "strategy", "predicted ms",
                   "tok/s", "bound ms", "resident", "streamed", "host", "split", "slots",
                   m ? "  measured ms  pred/meas" : "");
  for (const StrategyPrediction& s : p.strategies) {
    if (!s.error.empty()) {
      o += fmt::format("  {:<9} does not run: {}\n", s.name, s.error);
      continue;
    }
    std::string meas;
    if (m) {
      auto it = measured.find(s.name);
      if (it != measured.end() && it->second > 0)
        meas = fmt::format("  {:>11.2f}  {:>9.2f}", it->second * 1e3, s.pass_s / it->second);
      else
        meas = fmt::format("  {:>11}  {:>9}", "-", "-");
    }
    o += fmt::format("  {:<9} {:>12.2f} {:>10.2f} {:>11.2f} {:>9} {:>9} {:>5} {:>6} {:>6}{}\n", s.name, s.pass_s * 1e3,
                     s.tokens_per_s, s.lower_bound_s * 1e3, s.resident, s.streamed, s.host, s.split, s.plan.slots, meas);
  }
  o += "  sites per layer (R resident, S streamed to the device, H on the host, X split by rows):\n";
  for (const StrategyPrediction& s : p.strategies)
    if (s.error.empty()) o += fmt::format("  {:<9} {}\n", s.name, s.sites);
  return o;
}

nlohmann::json to_json(const BoxPrediction& p, const std::map<std::string, double>& measured) {
  using nlohmann::json;
  json strategies = json::array();
  for (const StrategyPrediction& s : p.strategies) {
    json j = {{"name", s.name}};
    if (!s.error.empty()) {
      j["error"] = s.error;
    } else {
      j.update({{"predicted_pass_s", s.pass_s},
                {"lower_bound_s", s.lower_bound_s},
                {"tokens_per_s", s.tokens_per_s},
                {"resident", s.resident},
                {"streamed", s.streamed},
                {"host", s.host},
                {"split", s.split},
                {"slots", s.plan.slots},
                {"prefetch_depth", s.plan.prefetch_depth},
                {"sites", s.sites}});
      auto it = measured.find(s.name);
      if (it != measured.end()) j["measured_median_s"] = it->second;
    }
    strategies.push_back(std::move(j));
  }
  return {{"box",
           {{"source", p.box_source},
            {"backend", p.box_backend},
            {"device", p.box_device},
            {"link_gbps", p.link_gbps},
            {"disk_gbps", p.disk_gbps},
            {"ram_read_gbps", p.ram_read_gbps},
            {"host_threads", p.host_threads},
            {"host_figures", p.host_figures},
            {"host_factor", p.host_factor}}},
          {"model",
           {{"source", p.model}, {"layers", p.layers}, {"weight_bytes", p.weight_bytes}, {"layer_names", p.layer_names}}},
          {"budgets", {{"vram_bytes", p.vram_budget}, {"ram_bytes", p.ram_budget}, {"reserve_bytes", p.reserve_bytes}}},
          {"workload", {{"mode", p.mode}, {"tokens_per_pass", p.tokens_per_pass}}},
          {"strategies", strategies}};
}

}  // namespace layerstream::bench

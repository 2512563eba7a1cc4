// Model::plan (layerstream/memory_plan.h): the runner's footprint for the
// options (reserve, layers), box figures (a probe file, or measured now), a
// cost model made from them, and the planner run at each budget. Nothing of
// the model is loaded and no pass runs.
//
// Compute estimates per layer, from matmul rates: decode is memory-bound
// (each weight byte read once per pass: bytes / the probe's decode GB/s for
// that type); prefill is compute-bound (2 x n_out x n_in x tokens / the
// probe's prefill GFLOP/s). When the figures are measured now on the host
// backend, one block and the head are also run with the model's own kernels
// (block_probe.h) and the estimates corrected by what the matmuls miss
// (attention at the decode position, norms, RoPE, activations): decode adds
// the block's measured time over its matmul estimate to every block, prefill
// scales by the measured / estimated ratio, the head is taken as measured.
// The same probe measures copy/compute contention, which the cost model
// charges on the host backend (CostModel::set_copy_contention).
// Lives in the planning area with the probe because it measures the box with
// probe_box when no box file is given.
#include <algorithm>
#include <fstream>
#include <map>
#include <optional>

#include "layerstream/model.h"
#include "layerstream/units.h"
#include "runtime/planning/block_probe.h"
#include "runtime/planning/box_probe.h"
#include "runtime/planning/box_profile.h"
#include "runtime/planning/expert_rows.h"
#include "runtime/planning/runner_executor_view.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/llama/model_impl.h"
#include "runtime/model/model_shape.h"
#include "runtime/scheduler/planner.h"
#include "runtime/scheduler/planner_input.h"

namespace layerstream {
namespace {

using nlohmann::json;

// Matmul rates per weight type name and shape ("decode" / "prefill").
struct Rates {
  std::map<std::pair<std::string, std::string>, planning::ComputePoint> points;
  // The point for `type` and `shape`; else the same shape of any type (scaled
  // by bytes per weight for decode); nullptr when the box has none.
  const planning::ComputePoint* find(const std::string& type, const std::string& shape) const {
    auto it = points.find({type, shape});
    if (it != points.end()) return &it->second;
    for (const auto& [k, p] : points)
      if (k.second == shape) return &p;
    return nullptr;
  }
};

struct Figures {
  double link_gbps = 0, disk_gbps = 0;
  Rates rates;
  std::string source;
  std::optional<planning::BlockTimes> block;  // one block and the head, run now (host backend)
  std::optional<BackendKind> box_backend;     // a box profile's: the machine planned for
};

// The figures of a box profile (box_profile.h: hand-written points may give
// only weight_gbps or only gflops/gmacs; a host profile's device rates are
// its host figures).
Result<Figures> figures_from_box(const std::string& path, io::IoPath io) {
  LS_ASSIGN_OR_RETURN(planning::BoxFigures box, planning::load_box_figures(path, io));
  Figures fig;
  fig.link_gbps = box.link_gbps;
  fig.disk_gbps = box.disk_gbps;
  fig.source = box.source;
  fig.box_backend = box.backend == "cuda" ? BackendKind::kCuda : BackendKind::kHost;
  fig.rates.points = box.device_rates().points;
  if (fig.rates.points.empty())
    return Status::Corruption("box file " + path + " has no compute figures (run `layerstream probe --json` with compute)");
  return fig;
}

// The probe of what the plan needs: link, the model file's disk rate through
// the chosen path, matmul rates of the model's weight types.
planning::ProbeOptions plan_probe_options(const std::string& model_path, const PlanOptions& o,
                                          const llama::RunnerFootprint& fp, io::IoPath io, BackendKind backend) {
  planning::ProbeOptions po;
  ModelOptions mo;
  mo.backend = o.backend;
  mo.sim_link_gbps = o.sim_link_gbps;
  mo.host_threads = o.host_threads;
  po.device = device_options_for(mo);
  po.chunk_bytes = {1 << 20, 16 << 20};
  po.seconds_per_point = 0.15;
  po.disk_file = model_path;
  // The disk as the run will read it: the weights, again and again for 2 s
  // (a shared or virtual disk's rate moves from second to second; one pass
  // over a small region measured it at its best), in the executor's pattern:
  // on the host one layer per read, the next once it has landed; through
  // staging buffers, all of them in flight.
  po.disk_region_bytes = 1ull << 30;
  po.disk_seconds_per_path = 2.0;
  po.disk_wrap = true;
  sched::ExecutorOptions eo;
  if (backend == BackendKind::kHost) {
    po.disk_request_bytes = 0;
    for (const sched::LayerSpec& l : fp.layers) po.disk_request_bytes = std::max(po.disk_request_bytes, sched::slot_span(l));
    po.disk_requests_in_flight = 1;
  } else {
    po.disk_request_bytes = eo.staging_buffer_bytes;
    po.disk_requests_in_flight = static_cast<int>(eo.staging_buffers);
    po.disk_reader_chunk_bytes = eo.staging_buffer_bytes;
  }
  po.staging_sweep = false;  // the plan reads with the executor's defaults
  po.io_paths = {io == io::IoPath::kAuto ? io::IoPath::kUring : io};
  po.types.clear();
  for (const auto& layer : fp.matmuls)
    for (const auto& m : layer)
      if (std::find(po.types.begin(), po.types.end(), m.type) == po.types.end()) po.types.push_back(m.type);
  return po;
}

// The model's largest matmul {n_out, n_in} with n_in rounded up to 256: the
// probe's matrix is synthetic, and a row length every block type divides
// (K-quants need 256; gemma3's 640-wide rows are not) changes its rate little.
std::pair<int64_t, int64_t> largest_matmul_shape(const llama::RunnerFootprint& fp) {
  int64_t n_out = 0, n_in = 0;
  for (const auto& layer : fp.matmuls)
    for (const auto& m : layer)
      if (m.n_out * m.n_in > n_out * n_in && m.n_in % 32 == 0) n_out = m.n_out, n_in = m.n_in;
  if (n_in == 0) n_out = 4096, n_in = 4096;
  return {n_out, static_cast<int64_t>(sched::round_up(static_cast<uint64_t>(n_in), 256))};
}

// Link, disk and matmul rates measured now (no --box): decode on a matrix of
// at least 256 MiB (a pass reads every weight once, from memory, not from a
// cache that holds one small matrix), then prefill at the model's largest
// shape and pass size; on the host, one block and the head as well.
Result<Figures> measure_figures(const std::string& model_path, const PlanOptions& o, const llama::RunnerFootprint& fp,
                                const llama::RunnerOptions& ro, BackendKind backend, int decode_position) {
  planning::ProbeOptions po = plan_probe_options(model_path, o, fp, ro.reader.path, backend);
  const auto [n_out, n_in] = largest_matmul_shape(fp);
  LS_LOG_INFO("plan: measuring link, disk and matmul rates (no --box given)");
  // Pass 1: link, disk, decode rates (prefill_tokens 1: both points decode-shaped).
  po.matmul_n_in = n_in;
  po.matmul_n_out = static_cast<int64_t>(std::max<uint64_t>(n_out, (256ull << 20) / std::max<int64_t>(n_in, 1)));
  po.prefill_tokens = 1;
  auto box = planning::probe_box(po);
  if (!box.ok()) return box.status().WithContext("measuring the box for the plan");
  Figures fig;
  fig.link_gbps = box->link_gbps;
  fig.disk_gbps = box->disk_gbps;
  for (const planning::DiskPoint& d : box->disk)
    if (d.error.empty() && d.gbps > 0) fig.disk_gbps = d.gbps;
  for (const planning::ComputePoint& c : box->compute) fig.rates.points[{c.type, "decode"}] = c;
  // Pass 2: prefill rates at the model's shape.
  po.h2d = false;
  po.disk = false;
  po.matmul_n_out = n_out;
  po.prefill_tokens = std::max(2, fp.max_pass_tokens);
  auto pre = planning::probe_box(po);
  if (!pre.ok()) return pre.status().WithContext("measuring prefill rates for the plan");
  for (const planning::ComputePoint& c : pre->compute)
    if (c.shape == "prefill") fig.rates.points[{c.type, c.shape}] = c;
  fig.source = "measured now";
  // One block and the head with the model's kernels (and, beside them, a copy).
  if (backend == BackendKind::kHost) {
    planning::BlockProbeOptions bo;
    bo.path = model_path;
    bo.runner = ro;
    bo.device = po.device;
    bo.decode_position = decode_position;
    bo.prefill_tokens = std::min(32, fp.max_pass_tokens);
    bo.contention = true;
    auto block = planning::probe_block(bo);
    if (block.ok()) fig.block = *block;
    else LS_LOG_WARN("plan: block probe failed ({}); compute from matmul rates alone", block.status().ToString());
  }
  return fig;
}

// Seconds of layer `i`'s matmuls for `tokens` tokens (decode: bytes / GB/s
// for one token, scaled by tokens when compute-bound is slower).
double layer_seconds(const std::vector<llama::RunnerFootprint::Matmul>& mats, const Rates& r, int tokens) {
  double s = 0;
  for (const auto& m : mats) {
    const std::string type = ggml_type_name(static_cast<uint32_t>(m.type));
    const planning::ComputePoint* dec = r.find(type, "decode");
    const planning::ComputePoint* pre = r.find(type, "prefill");
    const double mem_s = dec && dec->weight_gbps > 0 ? m.bytes / (dec->weight_gbps * 1e9) : 0;
    const double flop_s = pre && pre->gflops > 0 ? 2.0 * m.n_out * m.n_in * tokens / (pre->gflops * 1e9) : 0;
    s += tokens <= 1 ? mem_s : std::max(mem_s, flop_s);
  }
  return s;
}

// The cost model's compute per layer (decode and prefill classes) from the
// figures: matmul estimates, corrected by the block probe when there is one.
void record_compute_estimates(sched::CostModel& cost, const llama::RunnerFootprint& fp, const Figures& fig,
                              int decode_cls, int prefill_cls) {
  const int n = static_cast<int>(fp.layers.size());
  const planning::BlockTimes* b = fig.block ? &*fig.block : nullptr;
  const int head = n - 1;
  // A mixture of experts' layer runs the experts its tokens pick (expert_rows.h).
  const planning::MatmulSeconds device = [&fig](const llama::RunnerFootprint::Matmul& m, int tokens) {
    return layer_seconds({m}, fig.rates, tokens);
  };
  auto estimate = [&](int i, int tokens) { return planning::layer_matmul_seconds(fp, i, tokens, device); };
  double decode_extra = 0, prefill_ratio = 1;
  if (b) {
    decode_extra = b->block_decode_s - estimate(b->block_layer, fp.n_seq);
    const double est = b->prefill_tokens > 0 ? estimate(b->block_layer, b->prefill_tokens) : 0;
    if (est > 0 && b->block_prefill_s > 0) prefill_ratio = b->block_prefill_s / est;
  }
  for (int i = 0; i < n; ++i) {
    const double dec = estimate(i, fp.n_seq);
    const double pre = estimate(i, fp.max_pass_tokens);
    double d = dec, p = pre;
    if (b && i == head) {
      d = b->head_decode_s;
      if (b->head_prefill_s > 0) p = b->head_prefill_s;  // the head's rows: the last token of each sequence
    } else if (b) {
      d = std::max(dec + decode_extra, 0.5 * dec);
      p = pre * prefill_ratio;
    }
    cost.record_compute(i, decode_cls, d);
    if (prefill_cls != decode_cls) cost.record_compute(i, prefill_cls, p);
  }
  // Host backend: copies take compute from the same cores and memory. The
  // copy lane runs at the memcpy's own rate and each copied byte also costs
  // the compute lane what the probe saw it cost (docs/ARCHITECTURE.md): while
  // both run, a pass then takes compute + bytes x that cost, and copies that
  // outlast the compute go at their own rate.
  if (b && b->copy_gbps_alone > 0) {
    cost.set_link_bw(b->copy_gbps_alone * 1e9);
    cost.set_copy_contention(b->compute_s_per_copied_byte);
  }
}

// The footprint the runner would work from: of the model file, or of a
// shape (whose figures must then come from a box profile).
Result<llama::RunnerFootprint> plan_footprint(const std::string& path, const PlanOptions& o,
                                              const llama::RunnerOptions& ro, BackendKind backend) {
  if (o.shape.empty()) return llama::LlamaRunner::footprint(path, ro, backend);
  if (o.box.empty()) return Status::InvalidArgument("a model shape needs a box profile (box) to plan with");
  LS_ASSIGN_OR_RETURN(ExampleModelSpec spec, parse_model_shape(o.shape));
  LS_ASSIGN_OR_RETURN(GgufFile file, model_shape_file(spec, "shape " + o.shape));
  return llama::LlamaRunner::footprint(file, ro, backend);
}

// The plan's sizes: reserve, weights, the least and the all-resident budgets.
MemoryPlan plan_sizes(const std::string& path, const PlanOptions& o, const llama::RunnerFootprint& fp) {
  MemoryPlan plan;
  plan.model = path;
  plan.context = fp.n_ctx;
  plan.sequences = fp.n_seq;
  plan.pass_tokens = fp.max_pass_tokens;
  plan.kv_type = o.kv_type;
  plan.kv_bytes = fp.reserve.kv_bytes;
  plan.activation_bytes = fp.reserve.activation_bytes;
  const uint64_t reserve = sched::round_up(fp.reserve.total(), sched::kSlotAlignment);
  uint64_t all_layers = 0;
  for (const sched::LayerSpec& l : fp.layers) {
    plan.weight_bytes += l.bytes;
    plan.largest_layer_bytes = std::max(plan.largest_layer_bytes, sched::slot_span(l));
    all_layers += sched::round_up(l.bytes, sched::kSlotAlignment);
  }
  plan.min_vram_bytes = fp.min_vram_budget;
  plan.all_resident_vram_bytes = reserve + all_layers;
  return plan;
}

// Host site (hybrid execution): a box profile with host figures (RAM
// bandwidth, CPU matmul rates) gives each block a host compute time, and the
// planner chooses each block's site (the head stays on the device).
void record_host_estimates(sched::CostModel& cost, const llama::RunnerFootprint& fp, const planning::BoxFigures& box,
                           int decode_cls, int prefill_cls) {
  const planning::MatmulSeconds host = [&box](const llama::RunnerFootprint::Matmul& m, int tokens) {
    return planning::matmul_seconds(box.host, m.type, m.n_out, m.n_in, m.bytes, tokens, box.ram_read_gbps);
  };
  auto host_s = [&](int i, int tokens) { return planning::layer_matmul_seconds(fp, i, tokens, host); };
  for (int i = 0; i < static_cast<int>(fp.layers.size()); ++i) {
    cost.record_host_compute(i, decode_cls, host_s(i, fp.n_seq));
    if (prefill_cls != decode_cls) cost.record_host_compute(i, prefill_cls, host_s(i, fp.max_pass_tokens));
  }
}

// The budgets: the one asked for, or a range from the minimum to all resident.
std::vector<uint64_t> plan_budgets(const MemoryPlan& plan, const PlanOptions& o) {
  std::vector<uint64_t> budgets;
  if (o.vram_budget) return {o.vram_budget};
  const uint64_t lo = plan.min_vram_bytes, hi = std::max(plan.all_resident_vram_bytes, lo);
  for (int i = 0; i < o.budgets; ++i) {
    uint64_t b = o.budgets == 1 ? hi : lo + (hi - lo) * i / (o.budgets - 1);
    if (i > 0 && i + 1 < o.budgets) b = std::min(sched::round_up(b, 1 << 20), hi);  // never past all resident
    if (budgets.empty() || b > budgets.back()) budgets.push_back(b);
  }
  return budgets;
}

// One budget planned as the runner's executor would plan it (`view`, the
// planned strategy at that budget), for decode and prefill.
BudgetPlan plan_budget_row(const planning::RunnerExecutorView& view, const llama::RunnerFootprint& fp,
                           const sched::CostModel& cost, int decode_cls, int prefill_cls, bool has_prefill_rates) {
  BudgetPlan row;
  row.vram_bytes = view.options.vram_budget;
  row.ram_bytes = view.options.ram_budget;
  sched::PlannerInput in = view.planner_input(cost, decode_cls);
  auto decode_plan = sched::make_plan(in);
  if (!decode_plan.ok()) {
    row.placement = decode_plan.status().message();
    return row;
  }
  in.batch_class = prefill_cls;
  auto prefill_plan = sched::make_plan(in);
  const sched::Plan& p = *decode_plan;
  row.fits = true;
  row.layers_resident = p.count(sched::Tier::kResident);
  row.layers_ram = p.count(sched::Tier::kRam);
  row.layers_disk = p.count(sched::Tier::kDisk);
  row.slots = p.slots;
  row.placement = sched::describe_plan(p, in.bytes);
  row.predicted_decode_pass_s = p.predicted_pass_s;
  row.predicted_decode_tokens_per_s = p.predicted_pass_s > 0 ? fp.n_seq / p.predicted_pass_s : 0;
  if (has_prefill_rates && prefill_plan.ok() && prefill_plan->predicted_pass_s > 0)
    row.predicted_prefill_tokens_per_s = fp.max_pass_tokens / prefill_plan->predicted_pass_s;
  return row;
}

}  // namespace

Result<MemoryPlan> Model::plan(const std::string& path, const PlanOptions& o) {
  if (o.budgets < 1) return Status::InvalidArgument("budgets must be >= 1, got " + std::to_string(o.budgets));
  ModelOptions mo;
  mo.context = o.context;
  mo.sequences = o.sequences;
  mo.prefill_chunk = o.prefill_chunk;
  mo.kv_type = o.kv_type;
  mo.io = o.io;
  mo.host_threads = o.host_threads;
  llama::RunnerOptions ro = runner_options_for(mo);
  BackendKind backend = o.backend == Backend::kCuda ? BackendKind::kCuda : BackendKind::kHost;
  if (o.backend == Backend::kAuto && cuda_device_available().ok()) backend = BackendKind::kCuda;
  LS_ASSIGN_OR_RETURN(const llama::RunnerFootprint fp, plan_footprint(path, o, ro, backend));
  MemoryPlan plan = plan_sizes(path, o, fp);

  // Figures, and a cost model for decode (one token per sequence) and prefill.
  plan.decode_position = o.decode_position >= 0 ? o.decode_position : fp.n_ctx / 2;
  if (plan.decode_position >= fp.n_ctx)
    return Status::InvalidArgument("decode position " + std::to_string(plan.decode_position) +
                                   " is not below the context length " + std::to_string(fp.n_ctx));
  Figures fig;
  if (!o.box.empty()) {
    LS_ASSIGN_OR_RETURN(fig, figures_from_box(o.box, ro.reader.path));
  } else {
    LS_ASSIGN_OR_RETURN(fig, measure_figures(path, o, fp, ro, backend, plan.decode_position));
  }
  plan.figures_source = fig.source;
  plan.link_gbps = fig.link_gbps;
  plan.disk_gbps = fig.disk_gbps;
  plan.compute_source = fig.block ? "block probe" : "matmul rates";
  bool has_prefill_rates = false;  // without them no prefill prediction (0)
  for (const auto& [key, point] : fig.rates.points) has_prefill_rates |= key.second == "prefill";
  const int decode_cls = sched::batch_class(fp.n_seq), prefill_cls = sched::batch_class(fp.max_pass_tokens);
  sched::CostModel cost(static_cast<int>(fp.layers.size()));
  cost.set_link_bw(fig.link_gbps * 1e9);
  cost.set_disk_bw(fig.disk_gbps * 1e9);
  record_compute_estimates(cost, fp, fig, decode_cls, prefill_cls);
  if (fig.block) {
    plan.copy_alone_gbps = fig.block->copy_gbps_alone;
    plan.copy_beside_compute_gbps = fig.block->copy_gbps_contended;
    plan.copy_compute_ns_per_byte = cost.copy_contention() * 1e9;
  }
  std::optional<planning::BoxFigures> host_box;
  if (!o.box.empty()) {
    auto hb = planning::load_box_figures(o.box, ro.reader.path);
    if (hb.ok() && hb->has_host()) host_box = std::move(*hb);
  }
  if (host_box) record_host_estimates(cost, fp, *host_box, decode_cls, prefill_cls);
  cost.set_shared_compute(backend == BackendKind::kHost);  // split halves share the cores on the host backend

  // Each budget is planned as the runner's executor would plan it under the
  // planned strategy, sites included: host costs from the box's host figures
  // when given, else predicted as the executor predicts them before it
  // measures (sched::host_factor_before_measurement).
  llama::RunnerOptions planned = ro;
  planned.strategy = llama::Strategy::kPlanned;
  planned.ram_budget = o.ram_budget;
  const DeviceInfo device = sched::device_info_for(backend);
  // The host-cost prediction follows the machine planned for (as `bench --box`).
  const DeviceInfo planned_for = sched::device_info_for(fig.box_backend.value_or(backend));
  // Mixtures of experts: the expert-level rows beside the layer-level ones.
  planning::ExpertRowInputs experts;
  if (planning::describe_experts(plan, fp)) {
    const BackendKind for_backend = fig.box_backend.value_or(backend);
    experts.footprint = &fp;
    experts.cost = &cost;
    experts.device = [&fig](const llama::RunnerFootprint::Matmul& m, int tokens) {
      return layer_seconds({m}, fig.rates, tokens);  // as record_compute_estimates
    };
    if (host_box) {
      experts.host = [&host_box](const llama::RunnerFootprint::Matmul& m, int tokens) {
        return planning::matmul_seconds(host_box->host, m.type, m.n_out, m.n_in, m.bytes, tokens,
                                        host_box->ram_read_gbps);
      };
    } else if (for_backend == BackendKind::kHost) {
      experts.host = experts.device;  // the host backend's device is the CPU
    }
    experts.crossing_latency_s = for_backend == BackendKind::kCuda ? 10e-6 : 0;
    experts.decode_cls = decode_cls;
    experts.prefill_cls = prefill_cls;
    experts.prefill_rates = has_prefill_rates;
  }
  for (uint64_t b : plan_budgets(plan, o)) {
    const ExpertBudgetPlan expert_row = experts.footprint ? planning::plan_expert_budget(experts, b) : ExpertBudgetPlan{};
    if (b < plan.min_vram_bytes) {
      BudgetPlan row;
      row.experts = expert_row;
      row.vram_bytes = b;
      row.ram_bytes = o.ram_budget;
      row.placement = "below the minimum " + format_bytes(plan.min_vram_bytes) + " (KV + activations " +
                      format_bytes(fp.reserve.total()) + " + one slot " + format_bytes(plan.largest_layer_bytes) + ")";
      plan.budgets.push_back(row);
      continue;
    }
    planned.vram_budget = b;
    LS_ASSIGN_OR_RETURN(const planning::RunnerExecutorView view, planning::runner_executor_view(fp, planned, device));
    cost.set_host_factor(sched::host_factor_before_measurement(view.options, planned_for));
    plan.budgets.push_back(plan_budget_row(view, fp, cost, decode_cls, prefill_cls, has_prefill_rates));
    plan.budgets.back().experts = expert_row;
  }
  return plan;
}

}  // namespace layerstream

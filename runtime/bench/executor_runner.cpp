#include "runtime/bench/executor_runner.h"

#include "runtime/core/status_macros.h"
#include "runtime/scheduler/planner.h"

#include <fmt/format.h>

namespace layerstream::bench {

ExecutorRunner::ExecutorRunner(std::shared_ptr<void> owner, sched::Executor& executor, std::function<Status()> step,
                               std::vector<std::string> names)
    : owner_(std::move(owner)), ex_(executor), step_(std::move(step)), names_(std::move(names)) {}

Result<PassOutput> ExecutorRunner::run_pass() {
  const uint64_t before = ex_.passes_run();
  LS_RETURN_IF_ERROR(step_());
  if (ex_.passes_run() != before + 1)
    return Status::Internal(fmt::format("bench step ran {} executor passes, expected exactly 1",
                                        ex_.passes_run() - before));
  PassOutput out;
  out.summary = ex_.last_pass().summary;
  std::vector<sched::TraceEvent> all = std::move(pending_);
  pending_.clear();
  for (const sched::TraceEvent& e : ex_.trace().events()) all.push_back(e);
  ex_.trace().clear();
  // Disk reads for the next pass's prefetch may already be recorded: keep them.
  for (const sched::TraceEvent& e : all) {
    if (e.pass == before) out.events.push_back(e);
    else if (e.pass > before) pending_.push_back(e);
  }
  return out;
}

// The plan, then the measured costs that explain its sites (per block, the
// mean over the blocks: device compute, host compute, the link time of its
// bytes, and for splits the device fractions).
std::string ExecutorRunner::plan_description() const {
  const sched::Plan& p = ex_.plan();
  std::string out = sched::describe_plan(p, ex_.layer_bytes());
  const sched::CostModel& c = ex_.cost_model();
  const int cls = p.batch_class;
  const sched::PlannerInput in = ex_.planner_input(cls);
  double dev = 0, host = 0, link = 0;
  int n = 0, dev_measured = 0, host_measured = 0;
  for (int i = 0; i < static_cast<int>(in.bytes.size()); ++i) {
    if (!in.host_ok.empty() && !in.host_ok[i]) continue;
    dev += c.compute_s(i, cls);
    host += c.host_compute_s(i, cls);
    link += c.link_s(in.bytes[i]);
    dev_measured += c.measured(i, cls);
    host_measured += c.host_measured(i, cls);
    ++n;
  }
  if (n == 0) return out;
  out += fmt::format(
      "\n     costs (class {}, mean of {} {}): device compute {:.2f} ms ({} measured), host compute {:.2f} ms ({} "
      "measured{}), link {:.2f} ms at {:.2f} GB/s{}",
      cls, n, in.host_ok.empty() ? "layers" : "blocks", dev / n * 1e3, dev_measured, host / n * 1e3, host_measured,
      c.host_factor() > 0 ? fmt::format(", else {} x device", c.host_factor()) : std::string(", unknown until measured"),
      link / n * 1e3, c.link_bw() / 1e9,
      c.shared_compute() ? "; device and host share the cores (no split gain)" : "");
  // The activation crossing around host-site and split blocks (timed where it happens).
  if (c.crossing_s(cls) > 0)
    out += fmt::format("; activation crossing {:.1f} us ({})", c.crossing_s(cls) * 1e6,
                       c.crossing_measured(cls) ? "measured" : "prior");
  std::string fr;
  for (int i = 0; i < static_cast<int>(p.tiers.size()); ++i)
    if (p.site(i) == sched::Site::kSplit) fr += fmt::format("{}{}:{:.2f}", fr.empty() ? "" : " ", i, p.device_fraction(i));
  if (!fr.empty()) out += "; split device fractions " + fr;
  return out;
}

std::vector<LayerDesc> ExecutorRunner::layers() const {
  std::vector<LayerDesc> out;
  const auto& bytes = ex_.layer_bytes();
  for (size_t i = 0; i < bytes.size(); ++i) {
    LayerDesc d;
    d.name = i < names_.size() && !names_[i].empty() ? names_[i] : fmt::format("layer{}", i);
    d.bytes = bytes[i];
    d.tier = i < ex_.plan().tiers.size() ? ex_.plan().tiers[i] : sched::Tier::kResident;
    d.site = i < ex_.plan().tiers.size() ? ex_.plan().site(static_cast<int>(i)) : sched::Site::kDevice;
    out.push_back(std::move(d));
  }
  return out;
}

double ExecutorRunner::link_gbps() const { return ex_.cost_model().link_bw() / 1e9; }
double ExecutorRunner::disk_gbps() const { return ex_.cost_model().disk_bw() / 1e9; }
uint64_t ExecutorRunner::load_bytes() const { return ex_.load_bytes(); }

}  // namespace layerstream::bench

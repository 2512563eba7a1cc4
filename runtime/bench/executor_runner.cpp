#include "runtime/bench/executor_runner.h"

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

std::string ExecutorRunner::plan_description() const { return sched::describe_plan(ex_.plan(), ex_.layer_bytes()); }

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

// layerstream::Streamer (public, layerstream/streamer.h): open_device +
// sched::Executor behind a pimpl, mapping the public layer/call types onto
// LayerSpec/LayerRun.
#include "layerstream/streamer.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "io/reader.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/device.h"
#include "runtime/scheduler/executor.h"
#include "runtime/scheduler/plan.h"

namespace layerstream {
namespace {

sched::Tier to_tier(LayerHome h) {
  switch (h) {
    case LayerHome::kResident: return sched::Tier::kResident;
    case LayerHome::kRam: return sched::Tier::kRam;
    case LayerHome::kDisk: return sched::Tier::kDisk;
  }
  return sched::Tier::kResident;
}

LayerHome to_home(sched::Tier t) {
  switch (t) {
    case sched::Tier::kResident: return LayerHome::kResident;
    case sched::Tier::kRam: return LayerHome::kRam;
    case sched::Tier::kDisk: return LayerHome::kDisk;
  }
  return LayerHome::kResident;
}

sched::ComputeFn wrap(std::function<Status(const LayerCall&)> fn) {
  if (!fn) return nullptr;  // the executor names the layer in its error
  return [fn = std::move(fn)](const sched::LayerRun& run, Stream& compute) -> Status {
    LayerCall call;
    call.layer = run.layer;
    call.pass = run.pass;
    call.data = run.data;
    call.bytes = run.bytes;
    call.home = to_home(run.tier);
    call.slot = run.slot;
    call.batch_tokens = run.batch_tokens;
    call.native_stream = compute.native_handle();
    Stream* s = &compute;
    call.enqueue_host = [s](std::function<Status()> f) { return s->host_func(std::move(f)); };
    return fn(call);
  };
}

}  // namespace

struct Streamer::Impl {
  std::unique_ptr<Device> device;               // outlives the executor (declared first)
  std::unique_ptr<sched::Executor> executor;
  bool trace = false;
};

Streamer::Streamer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Streamer::~Streamer() = default;

Result<std::unique_ptr<Streamer>> Streamer::create(std::vector<StreamedLayer> layers, StreamerOptions options) {
  // Options first: nothing is opened or allocated when they are wrong.
  DeviceOptions dopt;
  LS_ASSIGN_OR_RETURN(dopt.backend, backend_from_name(options.backend));
  if (!std::isfinite(options.sim_link_gbps) || options.sim_link_gbps < 0)
    return Status::InvalidArgument(
        fmt::format("streamer: sim_link_gbps must be a finite number >= 0 GB/s, got {}", options.sim_link_gbps));
  dopt.sim_link_gbps = options.sim_link_gbps;
  if (options.vram_budget == 0)
    return Status::InvalidArgument("streamer: vram_budget must be > 0 bytes");
  if (layers.empty()) return Status::InvalidArgument("streamer: no layers");

  sched::ExecutorOptions eopt;
  LS_ASSIGN_OR_RETURN(eopt.reader.path, io_path_from_name(options.io));
  eopt.vram_budget = options.vram_budget;
  eopt.ram_budget = options.ram_budget;
  eopt.serial = options.serial;
  eopt.trace = options.trace;

  std::vector<sched::LayerSpec> specs;
  specs.reserve(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    StreamedLayer& l = layers[i];
    if (l.pin == LayerHome::kDisk && l.file.empty())
      return Status::InvalidArgument(fmt::format(
          "streamer: layer {} ({}) is pinned to disk but has no file", i, l.name.empty() ? "unnamed" : l.name));
    sched::LayerSpec s;
    s.name = std::move(l.name);
    s.bytes = l.bytes;
    s.host_data = l.host_data;
    s.file = std::move(l.file);
    s.file_offset = l.file_offset;
    if (l.pin) s.pin = to_tier(*l.pin);
    s.compute_hint_s = l.compute_hint_s;
    s.compute = wrap(std::move(l.compute));
    specs.push_back(std::move(s));
  }

  auto impl = std::make_unique<Impl>();
  impl->trace = options.trace;
  LS_ASSIGN_OR_RETURN(impl->device, open_device(dopt));
  LS_ASSIGN_OR_RETURN(impl->executor, sched::Executor::create(*impl->device, std::move(specs), std::move(eopt)));
  return std::unique_ptr<Streamer>(new Streamer(std::move(impl)));
}

Status Streamer::run_pass(int batch_tokens) {
  if (batch_tokens < 1)
    return Status::InvalidArgument(fmt::format("streamer: batch_tokens must be >= 1, got {}", batch_tokens));
  return impl_->executor->run_pass(batch_tokens);
}

StreamerStats Streamer::last_pass() const {
  StreamerStats st;
  if (impl_->executor->passes_run() == 0) return st;
  const sched::PassSummary& s = impl_->executor->last_pass().summary;
  st.pass = s.pass;
  st.measured_ms = s.measured_s * 1e3;
  st.predicted_ms = s.predicted_s * 1e3;
  st.lower_bound_ms = s.lower_bound_s * 1e3;
  st.overlap_efficiency = s.overlap_efficiency;
  st.stall_ms = s.total_stall_s() * 1e3;
  st.streamed_bytes = s.streamed_bytes;
  return st;
}

uint64_t Streamer::passes_run() const { return impl_->executor->passes_run(); }

LayerHome Streamer::home(int layer) const {
  const auto& tiers = impl_->executor->plan().tiers;
  LS_CHECK_MSG(layer >= 0 && layer < static_cast<int>(tiers.size()),
               "Streamer::home: layer " + std::to_string(layer) + " is outside [0, " + std::to_string(tiers.size()) + ")");
  return to_home(tiers[layer]);
}

std::string Streamer::plan_description() const {
  return sched::describe_plan(impl_->executor->plan(), impl_->executor->layer_bytes());
}

Status Streamer::write_trace(const std::string& path) const {
  if (!impl_->trace) return Status::InvalidArgument("streamer: write_trace needs StreamerOptions::trace = true");
  return impl_->executor->trace().write_chrome_json(path);
}

}  // namespace layerstream

// Executor: the host lane of hybrid execution. Host-site layers (Plan::sites)
// compute in pass order on a host-backend stream of the executor's own, from
// host memory (the RAM-tier copy, the caller's host_data, or a buffer read
// from the file through the page cache by an io::Reader of the lane's own), with the CPU kernels the layer's
// callback chooses. Only activations cross: activations_to_host is enqueued
// on the device compute stream before a run of host layers and the host lane
// waits for it (an event: a failed device stream fails the host lane rather
// than hanging it); after the run, the thread that calls run_pass waits for
// the host lane and enqueues activations_to_device before the next device
// layer. The copy stream goes on loading streamed layers meanwhile.
#include <algorithm>
#include <chrono>
#include <utility>
#include <fmt/format.h>

#include "runtime/core/status_macros.h"
#include "runtime/device/host/host_device.h"
#include "runtime/scheduler/executor.h"

namespace layerstream::sched {

double Executor::host_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_ref_).count();
}

bool Executor::measured_at_sites(int cls) const {
  for (int i = 0; i < n_; ++i) {
    const Site site = plan_.tiers.empty() ? Site::kDevice : plan_.site(i);
    // A split layer whose callback reports its halves (LayerRun::
    // split_timing) is a sample of both sites (CostModel::record_split);
    // one that does not takes its estimates from its other sites (or hints).
    if (site == Site::kSplit) {
      if (i >= static_cast<int>(split_reported_.size()) || !split_reported_[i]) continue;
      if (!cost_.measured(i, cls) || !cost_.host_measured(i, cls)) return false;
      continue;
    }
    if (site == Site::kHost ? !cost_.host_measured(i, cls) : !cost_.measured(i, cls)) return false;
  }
  return true;
}

Status Executor::prepare_host_lane() {
  const bool host_sites = plan_.count_site(Site::kHost) > 0;
  if (!host_sites && plan_.count_site(Site::kSplit) == 0) return Status::OK();
  if (host_sites && (!opt_.activations_to_host || !opt_.activations_to_device))
    return Status::InvalidArgument("the plan puts layers on the host site but the executor has no activation crossing hooks");
  if (!host_lane_) {
    DeviceOptions o;
    o.backend = BackendKind::kHost;
    LS_ASSIGN_OR_RETURN(host_dev_, host::open_host_device(o));
    LS_ASSIGN_OR_RETURN(host_lane_, host_dev_->create_stream(StreamRole::kCompute));
    LS_ASSIGN_OR_RETURN(to_host_, dev_.create_event());
    for (auto& par : cross_ev_)
      for (auto& e : par) {
        LS_ASSIGN_OR_RETURN(e, dev_.create_event());
      }
  }
  for (auto& v : host_ts_) v.assign(2 * static_cast<size_t>(n_), 0.0);
  for (auto& v : split_t_) v.assign(n_, SplitTiming{});
  split_reported_.resize(n_, false);
  uint64_t scratch = 0;
  for (int i = 0; i < n_; ++i) {
    if (plan_.site(i) != Site::kHost) continue;
    if (!layers_[i].host_ok)
      return Status::InvalidArgument(fmt::format("plan puts layer {} ({}) on the host site but its compute cannot run there", i, layers_[i].name));
    if (plan_.tiers[i] == Tier::kDisk) {
      scratch = std::max(scratch, bytes_[i]);
      LS_RETURN_IF_ERROR(open_host_reader(layers_[i].file));
    }
  }
  if (host_scratch_.size() < scratch) host_scratch_.assign(scratch, 0);
  return Status::OK();
}

// The host lane's reader of `path`: through the page cache, one read at a
// time (the lane computes in order); the caller's hooks (fault injection)
// apply as on the disk thread.
Status Executor::open_host_reader(const std::string& path) {
  if (host_readers_.count(path)) return Status::OK();
  io::ReaderOptions ro = opt_.reader;
  ro.path = io::IoPath::kBuffered;
  ro.queue_depth = 1;
  auto rd = io::open_reader(path, ro);
  if (!rd.ok()) return rd.status().WithContext("open " + path + " for the host lane");
  host_readers_.emplace(path, std::move(rd).value());
  return Status::OK();
}

// Enqueues one host-site layer on the host lane. `entering`: the previous
// layer ran on the device, so the activations cross first.
Status Executor::run_host_layer(LayerRun& run, bool entering) {
  const int i = run.layer;
  const int par = static_cast<int>(run.pass & 1);
  if (entering) {
    // The pass's first crossing to the host is timed (CostModel::record_crossing).
    const bool timed = !cross_rec_[par][0];
    if (timed) LS_RETURN_IF_ERROR(compute_->record(*cross_ev_[par][0]));
    LS_RETURN_IF_ERROR(opt_.activations_to_host(*compute_, run.batch_tokens));
    if (timed) LS_RETURN_IF_ERROR(compute_->record(*cross_ev_[par][1]));
    cross_rec_[par][0] = true;
    LS_RETURN_IF_ERROR(compute_->record(*to_host_));
    Event* ev = to_host_.get();
    LS_RETURN_IF_ERROR(host_lane_->host_func([ev] { return ev->synchronize(); }));
  }
  double* ts = &host_ts_[par][2 * i];
  LS_RETURN_IF_ERROR(host_lane_->host_func([this, ts] {
    ts[0] = host_us();
    return Status::OK();
  }));
  run.site = Site::kHost;
  if (plan_.tiers[i] == Tier::kDisk) {
    const LayerSpec& l = layers_[i];
    io::Reader* rd = host_readers_.at(l.file).get();
    uint8_t* dst = host_scratch_.data();
    LS_RETURN_IF_ERROR(host_lane_->host_func([this, rd, dst, &l, i, pass = run.pass] {
      const double t0 = host_us();
      LS_RETURN_IF_ERROR(rd->read_span(l.file_offset, l.bytes, dst).WithContext("host lane read of " + l.name));
      host_disk_reads_.push_back({TraceKind::kDiskRead, i, -1, pass, t0, host_us(), l.bytes});
      return Status::OK();
    }));
    run.data = dst;
  } else {
    run.data = const_cast<void*>(ram_copy(i));
    if (!run.data) run.data = const_cast<void*>(layers_[i].host_data);
  }
  if (!run.data) return Status::Internal(fmt::format("host-site layer {} has no host bytes", i));
  host_lane_->range_push(layers_[i].name.c_str());
  Status st = layers_[i].compute(run, *host_lane_);
  host_lane_->range_pop();
  LS_RETURN_IF_ERROR(st);
  return host_lane_->host_func([this, ts] {
    ts[1] = host_us();
    return Status::OK();
  });
}

// After a run of host layers: waits (on this thread) for the host lane, then
// the activations go back to the device ahead of the next device work.
Status Executor::leave_host_lane(uint64_t pass, int batch_tokens) {
  LS_RETURN_IF_ERROR(host_lane_->synchronize());
  const int par = static_cast<int>(pass & 1);
  const bool timed = !cross_rec_[par][1];  // the pass's first crossing back is timed
  if (timed) LS_RETURN_IF_ERROR(compute_->record(*cross_ev_[par][2]));
  LS_RETURN_IF_ERROR(opt_.activations_to_device(*compute_, batch_tokens));
  if (timed) LS_RETURN_IF_ERROR(compute_->record(*cross_ev_[par][3]));
  cross_rec_[par][1] = true;
  return Status::OK();
}

// After the pass (compute stream and host lane idle): the timed crossings
// and the split layers' halves become cost-model samples (pass 0 is cold:
// none). A split layer's device half is its compute-stream span less the
// time that stream waited for host work.
Status Executor::collect_crossings(uint64_t pass, int cls) {
  const int par = static_cast<int>(pass & 1);
  for (int d = 0; d < 2; ++d) {
    if (!std::exchange(cross_rec_[par][d], false) || pass == 0) continue;
    LS_ASSIGN_OR_RETURN(double ms, cross_ev_[par][2 * d + 1]->elapsed_ms_since(*cross_ev_[par][2 * d]));
    cost_.record_crossing(cls, std::max(0.0, ms) * 1e-3);
  }
  if (pass == 0 || plan_.count_site(Site::kSplit) == 0) return Status::OK();
  for (int i = 0; i < n_; ++i) {
    if (plan_.site(i) != Site::kSplit) continue;
    const SplitTiming& t = split_t_[par][i];
    if (!(t.host_s > 0)) continue;
    const double span = last_.compute_s.at(i);
    cost_.record_split(i, cls, plan_.device_fraction(i), std::max(0.0, span - t.device_idle_s), t.host_s);
    split_reported_[i] = true;
  }
  return Status::OK();
}

// Split layers: the callback enqueues its host half on the host lane between
// these marks (the trace's host-lane span of the layer) and joins the halves
// itself; when it returns, the host lane may still run the last host work,
// which the next join, host layer or the pass end waits for.
Status Executor::begin_split_layer(LayerRun& run) {
  const int i = run.layer;
  run.site = Site::kSplit;
  run.host_lane = host_lane_.get();
  run.host_data = ram_copy(i) ? ram_copy(i) : layers_[i].host_data;
  run.device_rows = plan_.device_fraction(i);
  if (!run.host_data || !run.host_lane) return Status::Internal(fmt::format("split layer {} has no host bytes or lane", i));
  SplitTiming& t = split_t_[run.pass & 1][static_cast<size_t>(i)];
  t = SplitTiming{};
  run.split_timing = &t;
  double* ts = &host_ts_[run.pass & 1][2 * static_cast<size_t>(i)];
  return host_lane_->host_func([this, ts] {
    ts[0] = host_us();
    return Status::OK();
  });
}

Status Executor::end_split_layer(const LayerRun& run) {
  double* ts = &host_ts_[run.pass & 1][2 * static_cast<size_t>(run.layer)];
  LS_RETURN_IF_ERROR(host_lane_->host_func([this, ts] {
    ts[1] = host_us();
    return Status::OK();
  }));
  // The host half's outputs are joined on the device before the callback
  // returns (it waits at each join), so this only keeps the marks in order.
  return host_lane_->synchronize();
}

}  // namespace layerstream::sched

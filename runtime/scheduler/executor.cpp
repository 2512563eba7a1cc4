// Executor start-up: options and layers checked, streams and the disk
// loader created, link and disk probed, the first plan applied; drain and
// the accessors. executor.h describes the whole.
#include "runtime/scheduler/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/planner_input.h"

namespace layerstream::sched {

using Clock = std::chrono::steady_clock;

Executor::Executor(Device& device, std::vector<LayerSpec> layers, ExecutorOptions options)
    : dev_(device),
      layers_(std::move(layers)),
      opt_(std::move(options)),
      replan_gate_(ReplanGateOptions{opt_.drift_passes, opt_.replan_min_gain, opt_.replan_confirmations}) {}

Result<std::unique_ptr<Executor>> Executor::create(Device& device, std::vector<LayerSpec> layers,
                                                   ExecutorOptions options) {
  std::unique_ptr<Executor> e(new Executor(device, std::move(layers), std::move(options)));
  LS_RETURN_IF_ERROR(e->init());
  return e;
}

// The disk thread stops first (its waits end), the streams finish, then the
// loader goes with its readers.
Executor::~Executor() {
  if (disk_) disk_->request_stop();
  if (compute_) (void)compute_->synchronize();
  if (copy_) (void)copy_->synchronize();
  if (disk_) disk_->stop();
  if (host_lane_) (void)host_lane_->synchronize();
  host_readers_.clear();  // the host lane is idle
  if (disk_copy_) (void)disk_copy_->synchronize();
  disk_.reset();  // cancels the readers
}

PlannerInput Executor::planner_input(int cls) const {
  return executor_planner_input(layers_, opt_, disk_direct_, cost_, cls);
}

// Options and layers checked, streams and the host clock reference, a
// placement proven possible, readers opened, the arena carved, the link and
// disk probed, then the first plan applied (which loads residents and the
// RAM tier) with the disk thread started.
Status Executor::init() {
  LS_ASSIGN_OR_RETURN(const uint64_t total, check_options_and_layers());
  disk_direct_ = disk_reads_direct(dev_.info(), opt_.force_staging);
  cost_ = CostModel(n_);
  for (int i = 0; i < n_; ++i) cost_.set_hint(i, layers_[i].compute_hint_s);
  cost_.set_host_factor(host_factor_before_measurement(opt_, dev_.info()));
  cost_.set_shared_compute(dev_.info().backend == BackendKind::kHost);  // split halves share the cores
  std::vector<std::string> names;
  for (auto& l : layers_) names.push_back(l.name);
  trace_.set_layer_names(std::move(names));
  trace_.set_enabled(opt_.trace);
  LS_RETURN_IF_ERROR(create_streams());
  const uint64_t reserve = round_up(opt_.reserved_vram, kSlotAlignment);
  LS_RETURN_IF_ERROR(check_placement_possible(reserve));
  disk_ = std::make_unique<DiskLoader>(layers_, spans_,
                                       DiskLoaderOptions{disk_direct_, opt_.reader, opt_.staging_buffer_bytes,
                                                         opt_.staging_buffers, disk_copy_.get(), host_ref_});
  for (const LayerSpec& l : layers_) {
    if (l.from_file()) LS_RETURN_IF_ERROR(disk_->reader_for(l.file).status());
  }
  LS_ASSIGN_OR_RETURN(arena_, dev_.create_arena(opt_.vram_budget));
  if (opt_.reserved_vram > 0) {
    LS_ASSIGN_OR_RETURN(reserved_, arena_->allocate("reserved", opt_.reserved_vram, kSlotAlignment));
  }
  LS_RETURN_IF_ERROR(probe_link());
  LS_RETURN_IF_ERROR(probe_disk());

  Plan p;
  if (opt_.plan) {
    p = *opt_.plan;
  } else {
    LS_ASSIGN_OR_RETURN(p, make_plan(planner_input(0)));
  }
  if (total <= opt_.vram_budget - reserve && p.streams_anything())
    LS_LOG_WARN("all {} layers ({}) fit in the VRAM budget ({} after the reserve) but the configuration streams {} of them",
                n_, format_bytes(total), format_bytes(opt_.vram_budget - reserve),
                p.count(Tier::kRam) + p.count(Tier::kDisk));
  disk_->start();
  return apply_plan(std::move(p));
}

// InvalidArgument for bad options or layers (names the empty ones); fills
// bytes_ and spans_. Returns the bytes of all layers resident.
Result<uint64_t> Executor::check_options_and_layers() {
  n_ = static_cast<int>(layers_.size());
  if (n_ == 0) return Status::InvalidArgument("executor: no layers");
  if (opt_.copy_chunk_bytes == 0) return Status::InvalidArgument("executor: copy_chunk_bytes must be > 0");
  if (opt_.staging_buffers < 1 || opt_.staging_buffers > 64)
    return Status::InvalidArgument(fmt::format("executor: staging_buffers must be in [1, 64], got {}", opt_.staging_buffers));
  if (opt_.staging_buffer_bytes < 4096)
    return Status::InvalidArgument(fmt::format("executor: staging_buffer_bytes must be >= 4096, got {}", opt_.staging_buffer_bytes));
  uint64_t total = 0;
  for (int i = 0; i < n_; ++i) {
    LayerSpec& l = layers_[i];
    if (l.name.empty()) l.name = fmt::format("layer{}", i);
    if (l.bytes == 0) return Status::InvalidArgument(fmt::format("layer {} ({}) has 0 bytes", i, l.name));
    if (!l.compute) return Status::InvalidArgument(fmt::format("layer {} ({}) has no compute function", i, l.name));
    if ((l.host_data != nullptr) == l.from_file())
      return Status::InvalidArgument(fmt::format(
          "layer {} ({}) needs exactly one source: host_data or a file (has {})", i, l.name,
          l.from_file() ? "both" : "neither"));
    bytes_.push_back(l.bytes);
    spans_.push_back(slot_span(l));
    total += round_up(l.bytes, kSlotAlignment);
  }
  return total;
}

// The compute and copy streams (and the disk-copy stream on the staged
// path), the pass-begin events and the device-to-host clock reference.
Status Executor::create_streams() {
  LS_ASSIGN_OR_RETURN(compute_, dev_.create_stream(StreamRole::kCompute));
  LS_ASSIGN_OR_RETURN(copy_, dev_.create_stream(StreamRole::kCopy));
  if (!disk_direct_) {
    LS_ASSIGN_OR_RETURN(disk_copy_, dev_.create_stream(StreamRole::kCopy));
  }
  LS_ASSIGN_OR_RETURN(ref_, dev_.create_event());
  for (int p = 0; p < 2; ++p) {
    LS_ASSIGN_OR_RETURN(auto e, dev_.create_event());
    pass_begin_.push_back(std::move(e));
  }
  LS_RETURN_IF_ERROR(compute_->record(*ref_));
  LS_RETURN_IF_ERROR(ref_->synchronize());
  host_ref_ = Clock::now();
  return Status::OK();
}

// Budget check before anything is allocated or read: one window slot next to
// the reserve, and a plan (the one given, or the planner's from hints).
Status Executor::check_placement_possible(uint64_t reserve) {
  // The largest layer that must compute on the device (under a host policy,
  // host-capable layers need no VRAM; a given plan says itself).
  uint64_t max_span = 0;
  for (int i = 0; i < n_; ++i) {
    const bool may_host = opt_.plan ? opt_.plan->sites.size() == spans_.size() && opt_.plan->sites[i] == Site::kHost
                                    : opt_.host_policy != HostPolicy::kNever && layers_[i].host_ok;
    if (!may_host) max_span = std::max(max_span, spans_[i]);
  }
  if (opt_.vram_budget < reserve + max_span) {
    return Status::OutOfBudget(fmt::format(
        "VRAM budget too small for one window slot plus the reserve: need {} ({} B: slot {} B + "
        "reserved {} B), available {} ({} B)",
        format_bytes(reserve + max_span), reserve + max_span, max_span, reserve,
        format_bytes(opt_.vram_budget), opt_.vram_budget));
  }
  if (opt_.plan) {
    if (opt_.plan->tiers.size() != static_cast<size_t>(n_))
      return Status::InvalidArgument(
          fmt::format("requested plan has {} tiers for {} layers", opt_.plan->tiers.size(), n_));
    return Status::OK();
  }
  auto r = make_plan(planner_input(0));
  if (!r.ok()) return r.status().WithContext("cannot place the layers");
  return Status::OK();
}

// The H2D rate: given, or the better of two copies of up to 4 MiB into the arena.
Status Executor::probe_link() {
  if (opt_.link_gbps > 0) {
    cost_.set_link_bw(opt_.link_gbps * 1e9);
  } else {
    uint64_t bytes = std::min<uint64_t>(4 << 20, arena_->largest_free() / 2 / 4096 * 4096);
    if (bytes >= 4096) {
      LS_ASSIGN_OR_RETURN(ArenaRegion r, arena_->allocate("link-probe", bytes, 4096));
      LS_ASSIGN_OR_RETURN(HostBuffer src, dev_.alloc_pinned(bytes));
      std::memset(src.data(), 0x5a, bytes);
      LS_ASSIGN_OR_RETURN(auto e0, dev_.create_event());
      LS_ASSIGN_OR_RETURN(auto e1, dev_.create_event());
      double best = 0;
      Status st;
      for (int rep = 0; rep < 2 && st.ok(); ++rep) {
        st = copy_->record(*e0);
        if (st.ok()) st = copy_->copy_h2d(r.ptr, src.data(), bytes);
        if (st.ok()) st = copy_->record(*e1);
        if (st.ok()) st = copy_->synchronize();
        if (st.ok()) {
          auto ms = e1->elapsed_ms_since(*e0);
          if (ms.ok() && *ms > 0) best = std::max(best, bytes / (*ms * 1e-3));
        }
      }
      arena_->free(r);
      LS_RETURN_IF_ERROR(st);
      cost_.set_link_bw(best > 0 ? best : 1e12);
    }
  }
  return Status::OK();
}

// The disk rate: given, or one read of up to 8 MiB of the first file-backed
// layer; then both rates are logged.
Status Executor::probe_disk() {
  const LayerSpec* first_file = nullptr;
  for (const LayerSpec& l : layers_)
    if (l.from_file()) { first_file = &l; break; }
  if (opt_.disk_gbps > 0) {
    cost_.set_disk_bw(opt_.disk_gbps * 1e9);
  } else if (first_file) {
    uint64_t bytes = std::min<uint64_t>(first_file->bytes, 8 << 20);
    LS_ASSIGN_OR_RETURN(HostBuffer buf, dev_.alloc_pinned(bytes));
    LS_ASSIGN_OR_RETURN(io::Reader * rd, disk_->reader_for(first_file->file));
    auto t0 = Clock::now();
    LS_RETURN_IF_ERROR(rd->read_span(first_file->file_offset, bytes, buf.data()));
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    cost_.set_disk_bw(s > 0 ? bytes / s : 1e12);
  }
  LS_LOG_INFO("scheduler: link {:.2f} GB/s{}, disk {:.2f} GB/s{}", cost_.link_bw() / 1e9,
              opt_.link_gbps > 0 ? " (given)" : " (probed)", cost_.disk_bw() / 1e9,
              opt_.disk_gbps > 0 ? " (given)" : first_file ? " (probed)" : " (unused)");
  return Status::OK();
}

Status Executor::load_layer_to_host(int i, void* dst) {
  const LayerSpec& l = layers_[i];
  if (l.host_data) {
    std::memcpy(dst, l.host_data, l.bytes);
  } else {
    LS_ASSIGN_OR_RETURN(io::Reader * rd, disk_->reader_for(l.file));
    LS_RETURN_IF_ERROR(
        rd->read_span(l.file_offset, l.bytes, dst).WithContext(fmt::format("load layer {} ({})", i, l.name)));
  }
  load_done_ += l.bytes;  // progress; load_bytes_ is counted by apply_plan
  if (opt_.load_progress && !opt_.load_progress(load_done_, std::max(load_total_, load_done_)))
    return Status::Cancelled(fmt::format("loading was cancelled after {} of {}", format_bytes(load_done_),
                                         format_bytes(std::max(load_total_, load_done_))));
  return Status::OK();
}

Status Executor::drain() {
  // Staged jobs read ahead of the compute frontier can never start their
  // copies now: the disk thread drops them (after their reads land).
  disk_->finish_or_drop_jobs();
  Status s1 = copy_->synchronize();
  Status s2 = compute_->synchronize();
  Status s3 = disk_copy_ ? disk_copy_->synchronize() : Status::OK();
  Status s4 = host_lane_ ? host_lane_->synchronize() : Status::OK();
  reset_stream_state();
  if (!s1.ok()) return s1;
  if (!s2.ok()) return s2;
  if (!s3.ok()) return s3;
  if (!s4.ok()) return s4;
  return disk_->error();
}

void Executor::reset_stream_state() {
  epoch_pass_ = pass_;
  g_compute_ = g_copy_ = 0;
  std::vector<uint64_t> spans;
  for (int i : streamed_) spans.push_back(spans_[i]);
  window_schedule_.reset(plan_.window_bytes, plan_.window(), std::move(spans));
  disk_->reset_counters();
}

std::vector<std::string> Executor::layer_names() const {
  std::vector<std::string> v;
  for (const LayerSpec& l : layers_) v.push_back(l.name);
  return v;
}

const void* Executor::ram_copy(int i) const {
  if (i < 0 || i >= n_ || plan_.tiers.empty() || plan_.tiers[i] != Tier::kRam) return nullptr;
  return i < static_cast<int>(ram_.size()) ? ram_[i].data() : nullptr;
}

const void* Executor::resident_host_view(int i) const {
  if (i < 0 || i >= n_ || !dev_.info().host_addressable || i >= static_cast<int>(resident_.size())) return nullptr;
  return resident_[i].ptr;
}

}  // namespace layerstream::sched

#include "runtime/scheduler/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unistd.h>

#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/scheduler/planner_input.h"

namespace layerstream::sched {

using Clock = std::chrono::steady_clock;

struct Executor::DiskJob {
  uint64_t g = 0;          // global streamed index (this plan epoch)
  int layer = 0;
  uint8_t* dst = nullptr;  // the layer's region in the window
  int64_t need = -1;       // streamed layer whose compute must finish before dst is written
  uint64_t pass = 0;
  int slot_index = 0;      // for traces
  int k = 0;               // index in streamed_ (timing events)
  // Staged path: events the disk thread records / waits on (fixed while the
  // job is live: a new plan drains every job first).
  Event* loaded = nullptr;     // recorded after the layer's last copy
  Event* need_done = nullptr;  // compute of `need` done (nullptr: none)
  Event* k_start = nullptr;
  Event* k_end = nullptr;
};

namespace {
uint64_t aligned_begin(const LayerSpec& l) { return l.file_offset / kSlotAlignment * kSlotAlignment; }
uint64_t data_offset(const LayerSpec& l) { return l.from_file() ? l.file_offset - aligned_begin(l) : 0; }
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

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

Executor::~Executor() {
  {
    MutexLock l(dmu_);
    stop_ = true;
  }
  dcv_.notify_all();
  if (compute_) (void)compute_->synchronize();
  if (copy_) (void)copy_->synchronize();
  if (disk_thread_.joinable()) disk_thread_.join();
  if (host_lane_) (void)host_lane_->synchronize();
  host_readers_.clear();  // the host lane is idle
  if (disk_copy_) (void)disk_copy_->synchronize();
  for (auto& [path, r] : readers_) r->cancel();
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
  cost_.set_host_factor(opt_.host_compute_factor);
  cost_.set_shared_compute(dev_.info().backend == BackendKind::kHost);  // split halves share the cores
  std::vector<std::string> names;
  for (auto& l : layers_) names.push_back(l.name);
  trace_.set_layer_names(std::move(names));
  trace_.set_enabled(opt_.trace);
  LS_RETURN_IF_ERROR(create_streams());
  const uint64_t reserve = round_up(opt_.reserved_vram, kSlotAlignment);
  LS_RETURN_IF_ERROR(check_placement_possible(reserve));
  for (const LayerSpec& l : layers_) {
    if (l.from_file()) LS_RETURN_IF_ERROR(reader_for(l.file).status());
  }
  LS_ASSIGN_OR_RETURN(arena_, dev_.create_arena(opt_.vram_budget));
  if (opt_.reserved_vram > 0) {
    LS_ASSIGN_OR_RETURN(reserved_, arena_->allocate("reserved", opt_.reserved_vram, kSlotAlignment));
  }
  LS_RETURN_IF_ERROR(probe());

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
  disk_thread_ = std::thread([this] { disk_thread_main(); });
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

Result<io::Reader*> Executor::reader_for(const std::string& path) {
  auto it = readers_.find(path);
  if (it != readers_.end()) return it->second.get();
  io::ReaderOptions ro = opt_.reader;
  if (!disk_direct_) {
    // One request per staging buffer, all of them in flight at once.
    ro.chunk_bytes = std::max<size_t>(ro.chunk_bytes, round_up(opt_.staging_buffer_bytes, 4096));
    ro.queue_depth = std::max(ro.queue_depth, opt_.staging_buffers);
  }
  LS_ASSIGN_OR_RETURN(auto r, io::open_reader(path, ro));
  io::Reader* raw = r.get();
  readers_.emplace(path, std::move(r));
  return raw;
}

Status Executor::probe() {
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
  const LayerSpec* first_file = nullptr;
  for (const LayerSpec& l : layers_)
    if (l.from_file()) { first_file = &l; break; }
  if (opt_.disk_gbps > 0) {
    cost_.set_disk_bw(opt_.disk_gbps * 1e9);
  } else if (first_file) {
    uint64_t bytes = std::min<uint64_t>(first_file->bytes, 8 << 20);
    LS_ASSIGN_OR_RETURN(HostBuffer buf, dev_.alloc_pinned(bytes));
    LS_ASSIGN_OR_RETURN(io::Reader * rd, reader_for(first_file->file));
    auto t0 = Clock::now();
    LS_RETURN_IF_ERROR(rd->read_span(first_file->file_offset, bytes, buf.data()));
    double s = seconds_since(t0);
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
    LS_ASSIGN_OR_RETURN(io::Reader * rd, reader_for(l.file));
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
  {
    MutexLock l(dmu_);
    abandon_ = true;
    dcv_.notify_all();
    while (!(finished_ == posted_ || !disk_error_.ok() || stop_)) dcv_.wait(dmu_);
    abandon_ = false;
  }
  Status s1 = copy_->synchronize();
  Status s2 = compute_->synchronize();
  Status s3 = disk_copy_ ? disk_copy_->synchronize() : Status::OK();
  Status s4 = host_lane_ ? host_lane_->synchronize() : Status::OK();
  reset_stream_state();
  if (!s1.ok()) return s1;
  if (!s2.ok()) return s2;
  if (!s3.ok()) return s3;
  if (!s4.ok()) return s4;
  MutexLock l(dmu_);
  return disk_error_;
}

// A new epoch of streamed-layer numbering (g from 0) at this pass boundary.
// REQUIRES: drained (nothing in flight, no disk job pending).
void Executor::reset_stream_state() {
  epoch_pass_ = pass_;
  g_compute_ = g_copy_ = 0;
  ring_place_ = WindowRing(std::max<uint64_t>(1, plan_.window_bytes), static_cast<uint64_t>(std::max(1, plan_.window())));
  placed_.clear();
  placed_base_ = 0;
  MutexLock l(dmu_);
  computed_ = disk_ready_ = done_recorded_ = 0;
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

// Checks `p`, then either keeps the placement (nothing moves) or drains,
// re-carves the arena, loads what is new and adopts the plan.
Status Executor::apply_plan(Plan p) {
  PlannerInput in = planner_input(p.batch_class);
  LS_RETURN_IF_ERROR(check_and_size_plan(p, in));
  evaluate_plan(in, p);
  count_load_total(p);
  if (same_placement(p)) {
    adopt_unchanged_placement(std::move(p));
    return Status::OK();
  }
  LS_RETURN_IF_ERROR(drain());
  std::vector<bool> fresh;  // resident in the new plan and needs loading
  LS_RETURN_IF_ERROR(carve_arena(p, fresh));
  LS_ASSIGN_OR_RETURN(const uint64_t moved, load_new_residents(fresh));
  LS_ASSIGN_OR_RETURN(const uint64_t loaded, load_ram_tier(p));
  load_bytes_ += moved + loaded;
  LS_RETURN_IF_ERROR(ensure_staging_ring(p));
  LS_RETURN_IF_ERROR(adopt_plan(std::move(p)));
  LS_LOG_INFO("scheduler plan: {} (loaded {})", describe_plan(plan_, bytes_), format_bytes(moved + loaded));
  return Status::OK();
}

// InvalidArgument for tiers against pins and sources; normalises slots and
// depth; fills slot, window, VRAM and RAM bytes; OutOfBudget when they do not
// fit the budgets in `in`.
Status Executor::check_and_size_plan(Plan& p, const PlannerInput& in) const {
  if (p.tiers.size() != static_cast<size_t>(n_))
    return Status::InvalidArgument(fmt::format("plan has {} tiers for {} layers", p.tiers.size(), n_));
  for (int i = 0; i < n_; ++i) {
    if (layers_[i].pin && *layers_[i].pin != p.tiers[i])
      return Status::InvalidArgument(fmt::format("plan puts layer {} ({}) in tier {} but it is pinned to {}", i,
                                                 layers_[i].name, tier_name(p.tiers[i]), tier_name(*layers_[i].pin)));
    if (p.tiers[i] == Tier::kDisk && !layers_[i].from_file())
      return Status::InvalidArgument(fmt::format("plan puts layer {} ({}) on disk but it has no file", i, layers_[i].name));
    if (p.site(i) == Site::kHost && (p.tiers[i] == Tier::kResident || !layers_[i].host_ok))
      return Status::InvalidArgument(fmt::format(
          "plan puts layer {} ({}) on the host site but it is {}", i, layers_[i].name,
          p.tiers[i] == Tier::kResident ? "resident (a host-site layer is in the ram or disk tier)"
                                        : "not host-capable (LayerSpec::host_ok)"));
  }
  if (!p.sites.empty() && p.sites.size() != static_cast<size_t>(n_))
    return Status::InvalidArgument(fmt::format("plan has {} sites for {} layers", p.sites.size(), n_));
  if (!p.device_rows.empty() && p.device_rows.size() != static_cast<size_t>(n_))
    return Status::InvalidArgument(fmt::format("plan has {} device row fractions for {} layers", p.device_rows.size(), n_));
  for (int i = 0; i < n_; ++i) {
    if (p.site(i) != Site::kSplit) continue;
    const double f = p.device_fraction(i);
    if (p.tiers[i] != Tier::kRam || !layers_[i].host_ok || layers_[i].split_tensors.empty() || !(f > 0 && f < 1))
      return Status::InvalidArgument(fmt::format(
          "plan splits layer {} ({}) but {}", i, layers_[i].name,
          p.tiers[i] != Tier::kRam ? fmt::format("it is in the {} tier (a split layer is in the ram tier)", tier_name(p.tiers[i]))
          : !(f > 0 && f < 1)      ? fmt::format("its device fraction {} is not in (0, 1)", f)
                                   : std::string("its compute cannot split (LayerSpec::host_ok, split_tensors)")));
  }
  if (p.streams_anything()) {
    if (p.slots < 1) return Status::InvalidArgument("plan streams layers but has no slots");
    p.prefetch_depth = std::clamp(p.prefetch_depth, 0, p.slots - 1);
  } else {
    p.slots = 0;
    p.prefetch_depth = 0;
  }
  p.slot_bytes = 0;
  p.vram_bytes = 0;
  p.ram_bytes = 0;
  for (int i = 0; i < n_; ++i) {
    if (p.tiers[i] == Tier::kResident) p.vram_bytes += round_up(bytes_[i], kSlotAlignment);
    else if (p.streamed(i)) p.slot_bytes = std::max(p.slot_bytes, spans_[i]);
    if (p.tiers[i] == Tier::kRam) p.ram_bytes += bytes_[i];
  }
  p.window_bytes = window_bytes_for(streamed_spans(spans_, p), p.slots);
  p.vram_bytes += p.window_bytes;
  if (p.vram_bytes > in.vram_budget)
    return Status::OutOfBudget(fmt::format(
        "placement needs {} ({} B) of VRAM for residents and a window of {} slot(s) ({} B), available {} ({} B) "
        "after reserving {} B",
        format_bytes(p.vram_bytes), p.vram_bytes, p.slots, p.window_bytes, format_bytes(in.vram_budget),
        in.vram_budget, opt_.reserved_vram));
  if (p.ram_bytes > in.ram_budget)
    return Status::OutOfBudget(fmt::format("placement needs {} ({} B) of pinned RAM, available {} ({} B)",
                                           format_bytes(p.ram_bytes), p.ram_bytes, format_bytes(in.ram_budget),
                                           in.ram_budget));
  return Status::OK();
}

// What the loads of `p` read (for the load progress callback).
void Executor::count_load_total(const Plan& p) {
  load_done_ = 0;
  load_total_ = 0;
  for (int i = 0; i < n_; ++i) {
    const bool in_ram = i < static_cast<int>(ram_.size()) && ram_[i].data();
    if ((p.tiers[i] == Tier::kResident && !in_ram && !layers_[i].host_data) || (p.tiers[i] == Tier::kRam && !in_ram))
      load_total_ += bytes_[i];
  }
}

// The same placement (e.g. a batch-class change that keeps it): nothing
// moves, the window and the prefetches already enqueued stay valid.
bool Executor::same_placement(const Plan& p) const {
  return arena_ && (window_.ptr || !plan_.streams_anything()) && !plan_.tiers.empty() && p.tiers == plan_.tiers &&
         p.sites == plan_.sites && p.device_rows == plan_.device_rows && p.slots == plan_.slots && p.prefetch_depth == plan_.prefetch_depth && p.window_bytes == plan_.window_bytes;
}

void Executor::adopt_unchanged_placement(Plan p) {
  plan_ = std::move(p);
  plan_compute_ = cost_.compute_all(plan_.batch_class);
  plan_measured_ = measured_at_sites(plan_.batch_class);
  LS_LOG_DEBUG("scheduler plan (unchanged placement): {}", describe_plan(plan_, bytes_));
}

// Re-carves the arena (bookkeeping only: no device allocation). Residents
// that stay resident keep their region and bytes; the window and the
// residents that leave are freed first so new ones can use the space. When
// kept residents fragment the arena, everything is carved afresh (all
// reload). fresh[i]: layer i got a new resident region.
Status Executor::carve_arena(const Plan& p, std::vector<bool>& fresh) {
  if (window_.ptr) arena_->free(window_);
  window_ = ArenaRegion{};
  resident_.resize(n_);
  fresh.assign(n_, false);
  for (int i = 0; i < n_; ++i) {
    if (p.tiers[i] != Tier::kResident && resident_[i].ptr) {
      arena_->free(resident_[i]);
      resident_[i] = ArenaRegion{};
    }
  }
  auto carve = [&]() -> Status {
    for (int i = 0; i < n_; ++i) {
      if (p.tiers[i] != Tier::kResident || resident_[i].ptr) continue;
      LS_ASSIGN_OR_RETURN(resident_[i], arena_->allocate(layers_[i].name, bytes_[i], kSlotAlignment));
      fresh[i] = true;
    }
    if (p.window_bytes > 0) {
      LS_ASSIGN_OR_RETURN(window_, arena_->allocate("window", p.window_bytes, kSlotAlignment));
    }
    return Status::OK();
  };
  if (Status st = carve(); !st.ok()) {
    LS_LOG_INFO("scheduler: re-carving the whole arena ({})", st.message());
    if (window_.ptr) arena_->free(window_);
    window_ = ArenaRegion{};
    for (auto& r : resident_)
      if (r.ptr) arena_->free(r);
    resident_.assign(n_, ArenaRegion{});
    LS_RETURN_IF_ERROR(carve());
  }
  return Status::OK();
}

// Loads the fresh residents: from the RAM copy when there is one, else the
// source (straight into host-addressable memory, else through a pinned
// bounce buffer). Returns the bytes loaded.
Result<uint64_t> Executor::load_new_residents(const std::vector<bool>& fresh) {
  uint64_t moved = 0;
  for (int i = 0; i < n_; ++i) {
    if (!fresh[i]) continue;
    const void* src = nullptr;
    if (i < static_cast<int>(ram_.size()) && ram_[i].data()) src = ram_[i].data();
    else if (layers_[i].host_data) src = layers_[i].host_data;
    else if (dev_.info().host_addressable) {
      LS_RETURN_IF_ERROR(load_layer_to_host(i, resident_[i].ptr));
      moved += bytes_[i];
      continue;
    } else {
      LS_RETURN_IF_ERROR(load_resident_through_bounce(i));
      moved += bytes_[i];
      continue;
    }
    for (uint64_t off = 0; off < bytes_[i]; off += opt_.copy_chunk_bytes)
      LS_RETURN_IF_ERROR(copy_->copy_h2d(static_cast<uint8_t*>(resident_[i].ptr) + off,
                                         static_cast<const uint8_t*>(src) + off,
                                         std::min(opt_.copy_chunk_bytes, bytes_[i] - off)));
    moved += bytes_[i];
  }
  LS_RETURN_IF_ERROR(copy_->synchronize());
  return moved;
}

// Resident layer i from its file through the bounce buffer, in pieces (the
// layer may be larger), on devices that are not host-addressable.
Status Executor::load_resident_through_bounce(int i) {
  const uint64_t want = std::min<uint64_t>(bytes_[i], 64 << 20);
  if (bounce_.size() < want) {
    bounce_.reset();
    LS_ASSIGN_OR_RETURN(bounce_, dev_.alloc_pinned(want));  // pinned once, kept for later re-plans
  }
  for (uint64_t off = 0; off < bytes_[i]; off += bounce_.size()) {
    const uint64_t n = std::min<uint64_t>(bounce_.size(), bytes_[i] - off);
    LS_ASSIGN_OR_RETURN(io::Reader * rd, reader_for(layers_[i].file));
    LS_RETURN_IF_ERROR(rd->read_span(layers_[i].file_offset + off, n, bounce_.data())
                           .WithContext(fmt::format("load layer {} ({})", i, layers_[i].name)));
    LS_RETURN_IF_ERROR(copy_->copy_h2d(static_cast<uint8_t*>(resident_[i].ptr) + off, bounce_.data(), n));
    LS_RETURN_IF_ERROR(copy_->synchronize());
  }
  return Status::OK();
}

// RAM tier: loaded once into pinned buffers; buffers of layers that left the
// tier are freed. Returns the bytes loaded.
Result<uint64_t> Executor::load_ram_tier(const Plan& p) {
  ram_.resize(n_);
  uint64_t to_load = 0, loaded = 0;
  for (int i = 0; i < n_; ++i) {
    if (p.tiers[i] != Tier::kRam) ram_[i].reset();
    else if (!ram_[i].data()) to_load += bytes_[i];
  }
  auto t0 = Clock::now();
  int last_pct = -1;
  for (int i = 0; i < n_; ++i) {
    if (p.tiers[i] != Tier::kRam || ram_[i].data()) continue;
    LS_ASSIGN_OR_RETURN(ram_[i], dev_.alloc_pinned(bytes_[i]));
    LS_RETURN_IF_ERROR(load_layer_to_host(i, ram_[i].data()));
    loaded += bytes_[i];
    int pct = static_cast<int>(100 * loaded / std::max<uint64_t>(1, to_load));
    if (layers_[i].from_file() && pct / 10 != last_pct / 10) {
      LS_LOG_INFO("scheduler: loading RAM tier {}% ({} of {}, {:.2f} s)", pct, format_bytes(loaded),
                  format_bytes(to_load), seconds_since(t0));
      last_pct = pct;
    }
  }
  return loaded;
}

// Staging buffers for staged disk reads: created (and pinned, and registered
// with the readers) once, when a plan first reads from disk on the staged
// path, and kept for the executor's life.
Status Executor::ensure_staging_ring(const Plan& p) {
  bool any_disk = false;
  for (int i = 0; i < n_; ++i) any_disk = any_disk || p.tiers[i] == Tier::kDisk;
  if (!any_disk || disk_direct_ || ring_) return Status::OK();
  // No more buffers (or bigger ones) than the file-backed layers can fill.
  uint64_t file_spans = 0, max_span = 0;
  for (int i = 0; i < n_; ++i)
    if (layers_[i].from_file()) {
      file_spans += spans_[i];
      max_span = std::max(max_span, spans_[i]);
    }
  io::StagingRingOptions ro;
  ro.buffer_bytes = std::min(round_up(opt_.staging_buffer_bytes, 4096), max_span);
  ro.buffer_count = static_cast<unsigned>(
      std::clamp<uint64_t>((file_spans + ro.buffer_bytes - 1) / ro.buffer_bytes, 2, opt_.staging_buffers));
  ro.pin = [this](void* d, size_t b) { return dev_.register_host(d, b); };
  LS_ASSIGN_OR_RETURN(ring_, io::StagingRing::create(ro));
  for (auto& [path, rd] : readers_) LS_RETURN_IF_ERROR(rd->register_buffers(ring_->iovecs()));
  while (buf_done_.size() < ring_->buffer_count()) {
    LS_ASSIGN_OR_RETURN(auto e, dev_.create_event());
    buf_done_.push_back(std::move(e));
  }
  return Status::OK();
}

// Makes `p` the plan: the streamed layers' order, events for its window, the
// cost estimates it was made with, a new epoch of streamed-layer numbering.
Status Executor::adopt_plan(Plan p) {
  if (opt_.on_plan_change) LS_RETURN_IF_ERROR(opt_.on_plan_change(plan_, p));
  plan_ = std::move(p);
  streamed_.clear();
  stream_index_.assign(n_, -1);
  for (int i = 0; i < n_; ++i)
    if (plan_.streamed(i)) {
      stream_index_[i] = static_cast<int>(streamed_.size());
      streamed_.push_back(i);
    }
  LS_RETURN_IF_ERROR(create_events());
  LS_RETURN_IF_ERROR(prepare_host_lane());
  plan_compute_ = cost_.compute_all(plan_.batch_class);
  plan_measured_ = measured_at_sites(plan_.batch_class);
  reset_stream_state();
  return Status::OK();
}

Status Executor::create_events() {
  auto fill = [&](std::vector<std::unique_ptr<Event>>& v, size_t count) -> Status {
    while (v.size() < count) {
      LS_ASSIGN_OR_RETURN(auto e, dev_.create_event());
      v.push_back(std::move(e));
    }
    return Status::OK();
  };
  LS_RETURN_IF_ERROR(fill(loaded_, events_per_ring()));
  LS_RETURN_IF_ERROR(fill(done_, events_per_ring()));
  for (int p = 0; p < 2; ++p) {
    LS_RETURN_IF_ERROR(fill(c_start_[p], n_));
    LS_RETURN_IF_ERROR(fill(c_end_[p], n_));
    LS_RETURN_IF_ERROR(fill(k_start_[p], streamed_.size()));
    LS_RETURN_IF_ERROR(fill(k_end_[p], streamed_.size()));
  }
  return Status::OK();
}

Status Executor::wait_counter(uint64_t Executor::*counter, uint64_t at_least) {
  MutexLock l(dmu_);
  while (!(this->*counter >= at_least || stop_ || !disk_error_.ok())) dcv_.wait(dmu_);
  if (!disk_error_.ok()) return disk_error_;
  if (this->*counter < at_least) return Status::Cancelled("executor shutting down");
  return Status::OK();
}

const Executor::Placed& Executor::placed(uint64_t g) {
  LS_CHECK(g >= placed_base_);
  const uint64_t m = streamed_.size();
  while (placed_base_ + placed_.size() <= g) {
    const uint64_t h = placed_base_ + placed_.size();
    const WindowRing::Placement pl = ring_place_.place(h, spans_[streamed_[h % m]]);
    const int64_t W = plan_.window();
    placed_.push_back({pl.offset, std::max<int64_t>(pl.overlaps, static_cast<int64_t>(h) - W)});
  }
  return placed_[g - placed_base_];
}

Status Executor::enqueue_ready_copies(uint64_t computing) {
  // Loads run up to W streamed layers ahead, and only once the compute they
  // wait for is enqueued (its "done" event recorded). Staged disk layers are
  // handed over further ahead: the disk thread reads them into the staging
  // buffers at once and issues their copies when that "done" is recorded.
  // Never more than one pass ahead (at most m streamed layers): a load for
  // the pass after next would re-record the timing events (k_start_/k_end_,
  // per pass parity) the pass being collected still reads.
  const uint64_t m = streamed_.size();
  const uint64_t W = std::min<uint64_t>(plan_.window(), m);
  const uint64_t L = std::min<uint64_t>(W + static_cast<uint64_t>(std::max(0, opt_.read_ahead_layers)), m);
  for (;;) {
    const uint64_t g = g_copy_;
    const bool staged_disk = !disk_direct_ && plan_.tiers[streamed_[g % m]] == Tier::kDisk;
    if (staged_disk ? g >= computing + L : (g >= computing + W || placed(g).need >= static_cast<int64_t>(computing)))
      break;
    LS_RETURN_IF_ERROR(enqueue_copy(g_copy_++));
  }
  while (placed_base_ < g_copy_ && placed_base_ + 1 < computing) {  // keep the placements still needed
    placed_.pop_front();
    ++placed_base_;
  }
  return Status::OK();
}

Status Executor::post_disk_job(uint64_t g, int layer, uint8_t* dst, int64_t need, uint64_t pass, int slot, int k) {
  const int E = events_per_ring();
  const int par = static_cast<int>(pass & 1);
  DiskJob job{g, layer, dst, need, pass, slot, k};
  job.loaded = loaded_[g % E].get();
  job.need_done = need >= 0 ? done_[need % E].get() : nullptr;
  job.k_start = k_start_[par][k].get();
  job.k_end = k_end_[par][k].get();
  {
    MutexLock lk(dmu_);
    jobs_.push_back(job);
    ++posted_;
  }
  dcv_.notify_all();
  return Status::OK();
}

Status Executor::enqueue_copy(uint64_t g) {
  const uint64_t m = streamed_.size();
  const int k = static_cast<int>(g % m);
  const int i = streamed_[k];
  const int E = events_per_ring();
  const uint64_t pass = epoch_pass_ + g / m;
  const int par = static_cast<int>(pass & 1);
  const LayerSpec& l = layers_[i];
  const Placed pl = placed(g);
  uint8_t* region = static_cast<uint8_t*>(window_.ptr) + pl.offset;
  const int slot = static_cast<int>(g % plan_.slots);
  if (plan_.tiers[i] == Tier::kDisk) return post_disk_job(g, i, region, pl.need, pass, slot, k);
  if (pl.need >= 0) LS_RETURN_IF_ERROR(copy_->wait(*done_[pl.need % E]));
  LS_RETURN_IF_ERROR(copy_->record(*k_start_[par][k]));
  copy_->range_push(l.name.c_str());
  const uint8_t* src = static_cast<const uint8_t*>(ram_[i].data());
  uint8_t* dst = region + data_offset(l);
  // A split layer's device half: only its rows (split_device_ranges) cross.
  const auto ranges = plan_.site(i) == Site::kSplit ? split_device_ranges(l, plan_.device_fraction(i))
                                                    : std::vector<std::pair<uint64_t, uint64_t>>{{0, l.bytes}};
  for (const auto& [begin, len] : ranges)
    for (uint64_t off = begin; off < begin + len; off += opt_.copy_chunk_bytes)
      LS_RETURN_IF_ERROR(copy_->copy_h2d(dst + off, src + off, std::min(opt_.copy_chunk_bytes, begin + len - off)));
  copy_->range_pop();
  LS_RETURN_IF_ERROR(copy_->record(*k_end_[par][k]));
  return copy_->record(*loaded_[g % E]);
}

void Executor::set_disk_error(const Status& st, int layer) {
  {
    MutexLock lk(dmu_);
    if (disk_error_.ok() && !st.IsCancelled())
      disk_error_ = st.WithContext(fmt::format("disk read of layer {} ({})", layer, layers_[layer].name));
  }
  dcv_.notify_all();
}

void Executor::disk_thread_main() {
  if (disk_direct_) disk_direct_loop();
  else disk_staged_loop();
}

// Direct path: one layer at a time, read straight into its region once the
// region is free (the compute it waits for has finished).
void Executor::disk_direct_loop() {
  for (;;) {
    DiskJob job;
    {
      MutexLock l(dmu_);
      while (!(stop_ || (!jobs_.empty() && disk_error_.ok()))) dcv_.wait(dmu_);
      if (stop_) return;
      job = jobs_.front();
      jobs_.pop_front();
    }
    const LayerSpec& l = layers_[job.layer];
    const uint64_t begin = aligned_begin(l), span = spans_[job.layer];
    io::Reader* rd = readers_.at(l.file).get();
    Status st;
    if (job.need >= 0) st = wait_counter(&Executor::computed_, static_cast<uint64_t>(job.need) + 1);
    const auto t0 = Clock::now();
    if (st.ok()) st = rd->submit({begin, span, job.dst, job.g});
    if (st.ok()) {
      io::ReadCompletion c;
      auto got = rd->wait(std::span<io::ReadCompletion>(&c, 1));
      if (!got.ok()) st = got.status();
      else if (*got != 1) st = Status::Internal("reader returned no completion");
      else if (!c.status.ok()) st = c.status;
      else if (begin + c.bytes_read < l.file_offset + l.bytes)
        st = Status::IOError(fmt::format("{}: short read of layer {} at offset {} ({} of {} bytes)", l.file,
                                         job.layer, begin, c.bytes_read, span));
    }
    if (!st.ok()) {
      set_disk_error(st, job.layer);
      continue;
    }
    {
      MutexLock lk(dmu_);
      const auto t1 = Clock::now();
      auto us = [&](Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - host_ref_).count(); };
      disk_samples_.push_back({span, std::chrono::duration<double>(t1 - t0).count()});
      disk_trace_.push_back({TraceKind::kDiskRead, job.layer, job.slot_index, job.pass, us(t0), us(t1), span});
      max_in_flight_ = std::max<int>(max_in_flight_, static_cast<int>(std::min<uint64_t>(
                                                          rd->queue_depth(), (span + rd->chunk_bytes() - 1) / rd->chunk_bytes())));
      disk_ready_ = job.g + 1;
      ++finished_;
    }
    dcv_.notify_all();
  }
}

// Staged path: reads into the staging buffers run ahead over every layer
// handed over; copies are issued in layer order, each chunk as it lands.
// The loop's state lives on the disk thread (StagedDiskLoop); each turn:
// take the new jobs (drop abandoned ones, sleep when idle), free the buffers
// whose copies finished, submit reads into free buffers, issue the copies of
// landed chunks, and when none of that made progress wait for a completion.
class Executor::StagedDiskLoop {
 public:
  explicit StagedDiskLoop(Executor& e) : e_(e) {}

  void run() {
    for (;;) {
      if (!take_jobs()) return;
      if (idle()) {
        wait_for_work();
        continue;
      }
      init_buffers();
      bool progress = false;
      Status st = free_copied_buffers(progress);
      if (st.ok()) st = submit_reads(progress);
      if (st.ok()) st = issue_copies(progress);
      if (st.ok() && !progress) st = wait_for_completion();
      if (!st.ok()) return fail(st);
    }
  }

 private:
  // One disk job being read and copied.
  struct Active {
    DiskJob job;
    uint64_t chunks = 0, next_read = 0, landed_count = 0, copied = 0;
    std::deque<std::pair<uint64_t, unsigned>> landed;  // (chunk, buffer) waiting for their copy
    bool started = false;
    bool dropped = false;    // abandoned by drain(): no more reads, no copies
    uint64_t reading = 0;    // reads in flight
    Clock::time_point t0{}, t_last{};
  };
  // One read in flight, by staging buffer.
  struct InFlight {
    uint64_t g = 0, chunk = 0, offset = 0, bytes = 0;
    io::Reader* reader = nullptr;
    Clock::time_point t0{};
  };

  double us(Clock::time_point t) const { return std::chrono::duration<double, std::micro>(t - e_.host_ref_).count(); }
  bool idle() const { return active_.empty() && inflight_.empty() && busy_bufs_.empty(); }
  // A failure and the layer it is about (front of the queue by default).
  Status failed(const Status& st, int layer) {
    fail_layer_ = layer;
    return st;
  }
  int front_layer() const { return active_.empty() ? 0 : active_.front().job.layer; }

  // The new jobs; under drain(), drops the jobs whose copies wait for a
  // compute that was never enqueued. False when the executor stops.
  bool take_jobs() LS_EXCLUDES(e_.dmu_) {
    MutexLock l(e_.dmu_);
    if (e_.stop_) return false;
    while (!e_.jobs_.empty()) {
      Active a;
      a.job = e_.jobs_.front();
      e_.jobs_.pop_front();
      active_.push_back(a);
    }
    done_rec_ = e_.done_recorded_;
    if (e_.abandon_) {
      // need is non-decreasing in g, so the dropped jobs are a tail of the list.
      for (Active& a : active_)
        if (!a.started && a.job.need >= 0 && static_cast<uint64_t>(a.job.need) >= done_rec_) a.dropped = true;
    }
    while (!active_.empty() && active_.back().dropped) {
      Active& a = active_.back();
      for (auto& [c, b] : a.landed) free_bufs_.push_back(b);
      a.landed.clear();
      if (a.reading > 0) break;  // its reads must land first (they write staging buffers)
      active_.pop_back();
      ++e_.finished_;
      e_.dcv_.notify_all();
    }
    return true;
  }

  // Nothing in flight: sleeps until a job, a stop or drain().
  void wait_for_work() LS_EXCLUDES(e_.dmu_) {
    MutexLock l(e_.dmu_);
    while (!(e_.stop_ || !e_.jobs_.empty() || e_.abandon_)) e_.dcv_.wait(e_.dmu_);
    if (e_.jobs_.empty() && !e_.stop_) {  // abandon_ with nothing to drop: let drain() see it
      e_.dcv_.notify_all();
      while (!(e_.stop_ || !e_.jobs_.empty() || !e_.abandon_)) e_.dcv_.wait(e_.dmu_);
    }
  }

  // apply_plan creates the ring before posting the first disk job.
  void init_buffers() {
    if (have_ring_) return;
    for (unsigned b = 0; b < e_.ring_->buffer_count(); ++b) free_bufs_.push_back(e_.ring_->buffer_count() - 1 - b);
    have_ring_ = true;
  }

  // 1. Buffers whose copy finished are free again.
  Status free_copied_buffers(bool& progress) {
    while (!busy_bufs_.empty()) {
      auto q = e_.buf_done_[busy_bufs_.front()]->query();
      if (!q.ok()) return failed(q.status(), front_layer());
      if (!*q) break;
      free_bufs_.push_back(busy_bufs_.front());
      busy_bufs_.pop_front();
      progress = true;
    }
    return Status::OK();
  }

  // 2. Reads into every free buffer, layers in order.
  Status submit_reads(bool& progress) LS_EXCLUDES(e_.dmu_) {
    const uint64_t cb = e_.ring_->buffer_bytes();
    for (Active& a : active_) {
      if (a.dropped) break;
      const LayerSpec& l = e_.layers_[a.job.layer];
      const uint64_t span = e_.spans_[a.job.layer];
      if (a.chunks == 0) a.chunks = (span + cb - 1) / cb;
      while (a.next_read < a.chunks && !free_bufs_.empty()) {
        const unsigned b = free_bufs_.back();
        const uint64_t off = aligned_begin(l) + a.next_read * cb, n = std::min(cb, span - a.next_read * cb);
        io::Reader* rd = e_.readers_.at(l.file).get();
        if (a.next_read == 0) a.t0 = Clock::now();
        if (Status st = rd->submit({off, n, e_.ring_->iovecs()[b].iov_base, b}); !st.ok()) return failed(st, a.job.layer);
        free_bufs_.pop_back();
        inflight_[b] = {a.job.g, a.next_read, off, n, rd, Clock::now()};
        ++a.next_read;
        ++a.reading;
        progress = true;
      }
      if (free_bufs_.empty()) break;
    }
    MutexLock lk(e_.dmu_);
    e_.max_in_flight_ = std::max<int>(e_.max_in_flight_, static_cast<int>(inflight_.size()));
    return Status::OK();
  }

  // 3. Copies of landed chunks, in layer order; a layer whose chunks are all
  // copied records its events and is handed back.
  Status issue_copies(bool& progress) LS_EXCLUDES(e_.dmu_) {
    while (!active_.empty()) {
      Active& a = active_.front();
      if (!a.started) {
        if (a.landed.empty() || a.dropped) break;
        // Its region is free once the compute it overwrites is done; that
        // "done" must be recorded before the copy stream can wait on it.
        if (a.job.need >= 0 && static_cast<uint64_t>(a.job.need) >= done_rec_) break;
        Status st;
        if (a.job.need_done) st = e_.disk_copy_->wait(*a.job.need_done);
        if (st.ok()) st = e_.disk_copy_->record(*a.job.k_start);
        if (!st.ok()) return failed(st, a.job.layer);
        e_.disk_copy_->range_push(e_.layers_[a.job.layer].name.c_str());
        a.started = true;
      }
      LS_RETURN_IF_ERROR(copy_landed_chunks(a, progress));
      if (a.copied < a.chunks) break;
      LS_RETURN_IF_ERROR(finish_layer(a));
      active_.pop_front();
    }
    return Status::OK();
  }

  Status copy_landed_chunks(Active& a, bool& progress) {
    const uint64_t cb = e_.ring_->buffer_bytes(), span = e_.spans_[a.job.layer];
    while (!a.landed.empty()) {
      auto [c, b] = a.landed.front();
      a.landed.pop_front();
      Status st = e_.disk_copy_->copy_h2d(a.job.dst + c * cb, e_.ring_->iovecs()[b].iov_base, std::min(cb, span - c * cb));
      if (st.ok()) st = e_.disk_copy_->record(*e_.buf_done_[b]);
      if (!st.ok()) return failed(st, a.job.layer);
      busy_bufs_.push_back(b);
      ++a.copied;
      progress = true;
    }
    return Status::OK();
  }

  // The layer's last copy is issued: its "loaded" event, its read sample.
  Status finish_layer(const Active& a) LS_EXCLUDES(e_.dmu_) {
    const uint64_t span = e_.spans_[a.job.layer];
    e_.disk_copy_->range_pop();
    Status st = e_.disk_copy_->record(*a.job.k_end);
    if (st.ok()) st = e_.disk_copy_->record(*a.job.loaded);
    if (!st.ok()) return failed(st, a.job.layer);
    {
      MutexLock lk(e_.dmu_);
      e_.disk_samples_.push_back({span, std::chrono::duration<double>(a.t_last - a.t0).count()});
      e_.disk_trace_.push_back(
          {TraceKind::kDiskRead, a.job.layer, a.job.slot_index, a.job.pass, us(a.t0), us(a.t_last), span});
      e_.disk_ready_ = a.job.g + 1;
      ++e_.finished_;
    }
    e_.dcv_.notify_all();
    return Status::OK();
  }

  // 4. Nothing to do until a read lands, a copy finishes, a "done" is
  // recorded, a new job comes or drain() asks.
  Status wait_for_completion() LS_EXCLUDES(e_.dmu_) {
    if (!inflight_.empty()) return land_reads();
    if (!busy_bufs_.empty()) {
      Status st = e_.buf_done_[busy_bufs_.front()]->synchronize();
      return st.ok() ? st : failed(st, front_layer());
    }
    MutexLock l(e_.dmu_);
    while (!(e_.stop_ || !e_.jobs_.empty() || e_.done_recorded_ != done_rec_ || e_.abandon_)) e_.dcv_.wait(e_.dmu_);
    return Status::OK();
  }

  // Completed reads (waiting up to 20 ms): each chunk joins its layer's
  // landed list, or frees its buffer when the layer was dropped.
  Status land_reads() LS_EXCLUDES(e_.dmu_) {
    io::Reader* rd = inflight_.begin()->second.reader;
    io::ReadCompletion done[64];
    auto got = rd->wait(std::span<io::ReadCompletion>(done, 64), std::chrono::milliseconds(20));
    if (!got.ok()) return failed(got.status(), front_layer());
    const auto now = Clock::now();
    for (size_t j = 0; j < *got; ++j) {
      const io::ReadCompletion& c = done[j];
      auto it = inflight_.find(static_cast<unsigned>(c.tag));
      if (it == inflight_.end()) continue;
      const InFlight f = it->second;
      inflight_.erase(it);
      Active* a = nullptr;
      for (Active& x : active_)
        if (x.job.g == f.g) a = &x;
      if (a == nullptr) continue;
      --a->reading;
      if (a->dropped) {
        free_bufs_.push_back(static_cast<unsigned>(c.tag));
        continue;
      }
      const LayerSpec& l = e_.layers_[a->job.layer];
      if (!c.status.ok()) return failed(c.status, a->job.layer);
      if (c.bytes_read < f.bytes && f.offset + c.bytes_read < l.file_offset + l.bytes)
        return failed(Status::IOError(fmt::format("{}: short read of layer {} at offset {} ({} of {} bytes)", l.file,
                                                  a->job.layer, f.offset, c.bytes_read, f.bytes)),
                      a->job.layer);
      a->landed.push_back({f.chunk, static_cast<unsigned>(c.tag)});
      ++a->landed_count;
      a->t_last = now;
      MutexLock lk(e_.dmu_);
      e_.disk_trace_.push_back(
          {TraceKind::kDiskChunk, a->job.layer, static_cast<int>(c.tag), a->job.pass, us(f.t0), us(now), f.bytes});
    }
    return Status::OK();
  }

  // The error goes to the executor; nothing may touch the buffers after it:
  // the reads are cancelled, the copies finished; then wait for the stop.
  void fail(const Status& st) LS_EXCLUDES(e_.dmu_) {
    e_.set_disk_error(st, fail_layer_ >= 0 ? fail_layer_ : front_layer());
    for (auto& [path, rd] : e_.readers_) rd->cancel();
    if (e_.disk_copy_) (void)e_.disk_copy_->synchronize();
    MutexLock l(e_.dmu_);
    while (!e_.stop_) e_.dcv_.wait(e_.dmu_);
  }

  Executor& e_;
  std::deque<Active> active_;
  std::vector<unsigned> free_bufs_;
  std::deque<unsigned> busy_bufs_;  // copies issued, oldest first
  std::map<unsigned, InFlight> inflight_;
  bool have_ring_ = false;
  uint64_t done_rec_ = 0;  // done_recorded_ as last seen
  int fail_layer_ = -1;
};

void Executor::disk_staged_loop() { StagedDiskLoop(*this).run(); }

// A re-plan when the batch class changed, each layer's compute in order
// (waiting for its load when it streams), then the end of the pass.
Status Executor::run_pass(int batch_tokens) {
  if (batch_tokens < 1) return Status::InvalidArgument(fmt::format("run_pass: batch_tokens must be >= 1, got {}", batch_tokens));
  const int cls = batch_class(batch_tokens);
  {
    MutexLock lk(dmu_);
    if (!disk_error_.ok()) return disk_error_;
  }
  if (opt_.auto_replan && !opt_.plan && cls != plan_.batch_class) {
    LS_LOG_INFO("scheduler: batch class {} -> {}, re-planning", plan_.batch_class, cls);
    PlannerInput in = planner_input(cls);
    LS_ASSIGN_OR_RETURN(Plan p, make_plan(in));
    const bool moves = !same_placement(p);
    LS_RETURN_IF_ERROR(apply_plan(std::move(p)));
    replan_gate_.reset();
    if (moves) ++replans_;
  }
  // Nothing streams, so nothing overlaps the compute: the host backend runs
  // the compute stream's work on this thread, and the pass ends without a
  // hand-off to its worker and a wake-up of this thread (measured at 4-30% of
  // a small model's decode pass on a loaded 2-core box).
  (void)compute_->set_run_on_caller(streamed_.empty());
  const uint64_t pass = pass_;
  cross_rec_[pass & 1][0] = cross_rec_[pass & 1][1] = false;  // a failed pass may have left them set
  LS_RETURN_IF_ERROR(compute_->record(*pass_begin_[pass & 1]));
  Site at = Site::kDevice;  // where the activations are
  for (int i = 0; i < n_; ++i) {
    if (plan_.site(i) == Site::kHost) {
      LayerRun run;
      run.layer = i;
      run.pass = pass;
      run.bytes = bytes_[i];
      run.tier = plan_.tiers[i];
      run.batch_tokens = batch_tokens;
      Status st = run_host_layer(run, at == Site::kDevice);
      at = Site::kHost;
      if (!st.ok()) {
        (void)drain();
        return st.WithContext(fmt::format("host compute of layer {} ({}) in pass {}", i, layers_[i].name, pass));
      }
      continue;
    }
    if (at == Site::kHost) {
      at = Site::kDevice;
      if (Status st = leave_host_lane(pass, batch_tokens); !st.ok()) {
        (void)drain();
        return st.WithContext(fmt::format("host lane before layer {} ({}) in pass {}", i, layers_[i].name, pass));
      }
    }
    LS_RETURN_IF_ERROR(run_layer(i, pass, batch_tokens));
  }
  if (at == Site::kHost) {
    if (Status st = leave_host_lane(pass, batch_tokens); !st.ok()) {
      (void)drain();
      return st.WithContext(fmt::format("host lane at the end of pass {}", pass));
    }
  }
  return finish_pass(pass, cls);
}

// Enqueues layer i's compute of `pass`: a streamed layer waits for its load
// (on the host for a disk layer: the disk thread has read it or issued its
// copies, so a failed read fails the pass here) and records its "done" for
// the loads and the disk thread behind it.
Status Executor::run_layer(int i, uint64_t pass, int batch_tokens) {
  const int par = static_cast<int>(pass & 1);
  const int E = events_per_ring();
  const bool disk_counters = disk_direct_ && plan_.count(Tier::kDisk) > 0;
  const bool staged_disk = !disk_direct_ && plan_.count(Tier::kDisk) > 0;
  LayerRun run;
  run.layer = i;
  run.pass = pass;
  run.bytes = bytes_[i];
  run.tier = plan_.tiers[i];
  run.batch_tokens = batch_tokens;
  uint64_t g = 0;
  if (stream_index_[i] >= 0) {
    g = g_compute_++;
    LS_RETURN_IF_ERROR(enqueue_ready_copies(g));
    run.slot = static_cast<int>(g % plan_.slots);
    run.data = static_cast<uint8_t*>(window_.ptr) + placed(g).offset + data_offset(layers_[i]);
    if (plan_.tiers[i] == Tier::kDisk) {
      if (Status st = wait_counter(&Executor::disk_ready_, g + 1); !st.ok()) {
        (void)drain();
        return st.WithContext(fmt::format("loading layer {} ({}) for pass {}", i, layers_[i].name, pass));
      }
    }
    if (plan_.tiers[i] != Tier::kDisk || !disk_direct_) LS_RETURN_IF_ERROR(compute_->wait(*loaded_[g % E]));
  } else {
    run.data = resident_[i].ptr;
  }
  const bool split = plan_.site(i) == Site::kSplit;
  if (split) LS_RETURN_IF_ERROR(begin_split_layer(run));
  LS_RETURN_IF_ERROR(compute_->record(*c_start_[par][i]));
  compute_->range_push(layers_[i].name.c_str());
  Status st = layers_[i].compute(run, *compute_);
  compute_->range_pop();
  if (st.ok() && split) st = end_split_layer(run);
  if (!st.ok()) {
    (void)drain();
    return st.WithContext(fmt::format("compute of layer {} ({}) in pass {}", i, layers_[i].name, pass));
  }
  LS_RETURN_IF_ERROR(compute_->record(*c_end_[par][i]));
  if (run.slot < 0) return Status::OK();
  LS_RETURN_IF_ERROR(compute_->record(*done_[g % E]));
  if (staged_disk) {
    {
      MutexLock lk(dmu_);
      done_recorded_ = g + 1;
    }
    dcv_.notify_all();
  }
  if (disk_counters) {
    LS_RETURN_IF_ERROR(compute_->host_func([this, g] {
      {
        MutexLock lk(dmu_);
        computed_ = g + 1;
      }
      dcv_.notify_all();
      return Status::OK();
    }));
  }
  return Status::OK();
}

// The next pass's first streamed layers start loading (cyclic prefetch); the
// pass completes and is collected; a re-plan once the costs are measured or
// have drifted.
Status Executor::finish_pass(uint64_t pass, int cls) {
  // Cyclic prefetch: the next pass's first streamed layers load now.
  if (!streamed_.empty()) LS_RETURN_IF_ERROR(enqueue_ready_copies(g_compute_));
  Status st = compute_->synchronize();
  if (!st.ok()) {
    MutexLock lk(dmu_);
    return disk_error_.ok() ? st : disk_error_;
  }
  LS_RETURN_IF_ERROR(collect_pass(pass, cls));
  ++pass_;
  if (opt_.auto_replan && !opt_.plan) {
    // After warm-up: once every layer is measured, then when the costs have
    // drifted for drift_passes passes in a row (replan_gate.h).
    const bool warm = pass_ - epoch_pass_ >= static_cast<uint64_t>(opt_.warmup_passes);
    const bool first_measured = warm && !plan_measured_ && measured_at_sites(cls);
    const bool drift_lasted = warm && plan_measured_ && replan_gate_.observe(drifted(cls));
    if (first_measured || drift_lasted) {
      LS_ASSIGN_OR_RETURN(bool changed, first_measured ? replan_confirmed(1, /*from_hints=*/true)
                                                        : replan_confirmed(opt_.replan_confirmations));
      (void)changed;
    }
  }
  return Status::OK();
}

bool Executor::drifted(int cls) const {
  std::vector<double> now = cost_.compute_all(cls);
  double total_old = 0;
  for (double x : plan_compute_) total_old += x;
  for (int i = 0; i < n_; ++i) {
    double d = std::abs(now[i] - plan_compute_[i]);
    if (d > opt_.drift_threshold * plan_compute_[i] && d > 0.02 * total_old) return true;
  }
  Plan p = plan_;
  PlannerInput in = planner_input(cls);
  evaluate_plan(in, p);
  return std::abs(p.predicted_pass_s - plan_.predicted_pass_s) > opt_.drift_threshold * plan_.predicted_pass_s;
}

Result<bool> Executor::replan() { return replan_confirmed(1); }

Result<bool> Executor::replan_confirmed(int confirmations, bool from_hints) {
  PlannerInput in = planner_input(plan_.batch_class);
  LS_ASSIGN_OR_RETURN(Plan p, make_plan(in));
  replan_gate_.reset();
  bool keep = p.tiers == plan_.tiers && p.sites == plan_.sites && p.device_rows == plan_.device_rows && p.slots == plan_.slots &&
              p.prefetch_depth == plan_.prefetch_depth;
  bool pending = false;  // a new placement waits to be proposed again
  if (!keep) {
    // Many placements predict within noise of each other (streamed layers
    // of one size; a block that costs about the same on either site of a
    // host backend), so a new plan must beat the current one, re-evaluated
    // under the same costs, by replan_min_gain to be worth moving bytes for.
    // Without this, measurement noise makes the plan churn (every change
    // reloads residents and moves KV caches).
    Plan cur = plan_;
    evaluate_plan(in, cur);
    if (!from_hints && !replan_gate_.worth_moving(cur.predicted_pass_s, p.predicted_pass_s)) {
      keep = true;
      p = std::move(cur);
    } else if (confirmations > 1) {
      std::string placement = site_map(p) + ' ' + std::to_string(p.slots) + ' ' + std::to_string(p.prefetch_depth);
      for (Tier t : p.tiers) placement += static_cast<char>('0' + static_cast<int>(t));
      for (double f : p.device_rows) placement += ' ' + std::to_string(f);
      if (!replan_gate_.confirm(std::move(placement))) {
        LS_LOG_DEBUG("scheduler: re-plan proposes a new placement; waiting for it to be proposed again");
        keep = pending = true;
        p = std::move(cur);
      }
    }
  }
  // Pending: the plan's baseline stays, so the drift that led here is seen
  // again after drift_passes passes and the candidate proposed once more.
  if (pending) return false;
  if (keep) replan_gate_.forget_candidate();
  if (keep) {
    plan_.predicted_pass_s = p.predicted_pass_s;
    plan_.lower_bound_s = p.lower_bound_s;
    plan_compute_ = cost_.compute_all(plan_.batch_class);
    plan_measured_ = measured_at_sites(plan_.batch_class);
    LS_LOG_DEBUG("scheduler: re-plan keeps the plan; predicted pass {:.3f} ms, bound {:.3f} ms",
                plan_.predicted_pass_s * 1e3, plan_.lower_bound_s * 1e3);
    return false;
  }
  LS_RETURN_IF_ERROR(apply_plan(std::move(p)));
  ++replans_;
  return true;
}

// After a pass: per-layer compute and copy times into the cost model and
// the trace, the disk thread's reads, then the pass summary.
Status Executor::collect_pass(uint64_t pass, int cls) {
  PassStats st;
  double begin = 0, end = 0;
  uint64_t ram_bytes = 0;
  LS_RETURN_IF_ERROR(collect_layer_times(pass, cls, st, begin, end, ram_bytes));
  collect_disk_reads(st);
  summarize_pass(st, cls, begin, end, ram_bytes);
  last_ = std::move(st);
  return collect_crossings(pass, cls);
}

// Microseconds from the executor's reference event to `e`.
Result<double> Executor::event_us(const Event& e) const {
  LS_ASSIGN_OR_RETURN(double ms, e.elapsed_ms_since(*ref_));
  return ms * 1e3;
}

// Each layer's compute time and stall (cost model from pass 1 on: pass 0 is
// cold), each RAM-tier copy's rate, and their trace events. begin / end: the
// pass's first and last compute, in event microseconds; ram_bytes: copied
// from the RAM tier.
Status Executor::collect_layer_times(uint64_t pass, int cls, PassStats& st, double& begin, double& end,
                                     uint64_t& ram_bytes) {
  const int par = static_cast<int>(pass & 1);
  st.compute_s.assign(n_, 0);
  st.summary.pass = pass;
  st.summary.stall_s.assign(n_, 0);
  LS_ASSIGN_OR_RETURN(begin, event_us(*pass_begin_[par]));
  double prev_end = begin;
  end = begin;
  for (int i = 0; i < n_; ++i) {
    const bool on_host = plan_.site(i) == Site::kHost;
    double a = 0, b = 0;
    if (on_host) {
      a = host_ts_[par][2 * i];
      b = host_ts_[par][2 * i + 1];
    } else {
      LS_ASSIGN_OR_RETURN(a, event_us(*c_start_[par][i]));
      LS_ASSIGN_OR_RETURN(b, event_us(*c_end_[par][i]));
    }
    double c = std::max(0.0, b - a) * 1e-6;
    st.compute_s[i] = c;
    const bool split = plan_.site(i) == Site::kSplit;
    // A split layer's span mixes both sites (and its joins): collect_crossings
    // takes its halves as reported; the trace shows its host half on the host lane.
    if (split) trace_.add({TraceKind::kHostCompute, i, -1, pass, host_ts_[par][2 * i], host_ts_[par][2 * i + 1], 0});
    if (pass > 0 && on_host) cost_.record_host_compute(i, cls, c);
    else if (pass > 0 && !split) cost_.record_compute(i, cls, c);  // pass 0 is cold (first touch): not a sample
    st.summary.sum_compute_s += c;
    double stall = std::max(0.0, a - prev_end);
    st.summary.stall_s[i] = stall * 1e-6;
    const int k = stream_index_[i];
    const int slot = k >= 0 ? static_cast<int>(((pass - epoch_pass_) * streamed_.size() + k) % plan_.slots) : -1;
    trace_.add({on_host ? TraceKind::kHostCompute : TraceKind::kCompute, i, slot, pass, a, b, 0});
    if (stall > 1.0) trace_.add({TraceKind::kStall, i, -1, pass, prev_end, a, 0});
    if (k >= 0) {
      const uint64_t moved = split ? split_device_bytes(layers_[i], plan_.device_fraction(i)) : bytes_[i];
      st.summary.streamed_bytes += moved;
      const bool copied = plan_.tiers[i] == Tier::kRam || !disk_direct_;  // direct reads have no copy events
      if (copied) {
        LS_ASSIGN_OR_RETURN(double ka, event_us(*k_start_[par][k]));
        LS_ASSIGN_OR_RETURN(double kb, event_us(*k_end_[par][k]));
        if (plan_.tiers[i] == Tier::kRam) {
          ram_bytes += moved;
          if (pass > 0) cost_.record_link(moved, (kb - ka) * 1e-6);
        }
        trace_.add({TraceKind::kCopy, i, slot, pass, ka, kb, moved});
      }
    }
    prev_end = b;
    end = b;
  }
  return Status::OK();
}

// The disk thread's reads since the last pass: the disk rate is the bytes of
// the layer reads over the time the disk was busy (the union of the reads'
// intervals: staged reads of several layers overlap); their trace events.
void Executor::collect_disk_reads(PassStats& st) {
  std::vector<std::pair<uint64_t, double>> ds;
  std::vector<TraceEvent> dt;
  int in_flight = 0;
  {
    MutexLock lk(dmu_);
    ds.swap(disk_samples_);
    dt.swap(disk_trace_);
    in_flight = std::exchange(max_in_flight_, 0);
  }
  std::vector<std::pair<double, double>> iv;
  uint64_t read_bytes = 0;
  for (const TraceEvent& e : dt)
    if (e.kind == TraceKind::kDiskRead) {
      iv.push_back({e.start_us, e.end_us});
      read_bytes += e.bytes;
    }
  std::sort(iv.begin(), iv.end());
  double busy_us = 0, cur_a = 0, cur_b = -1;
  for (auto [a, b] : iv) {
    if (a > cur_b) {
      if (cur_b > cur_a) busy_us += cur_b - cur_a;
      cur_a = a;
      cur_b = b;
    } else {
      cur_b = std::max(cur_b, b);
    }
  }
  if (cur_b > cur_a) busy_us += cur_b - cur_a;
  if (read_bytes > 0 && busy_us > 0) cost_.record_disk(read_bytes, busy_us * 1e-6);
  st.summary.disk_bytes = read_bytes;
  st.summary.disk_s = busy_us * 1e-6;
  st.summary.max_reads_in_flight = in_flight;
  for (auto& e : dt) trace_.add(e);
}

// Measured time, the prediction for the plan in force under the costs
// measured so far, the lower bound and the overlap efficiency.
void Executor::summarize_pass(PassStats& st, int cls, double begin, double end, uint64_t ram_bytes) {
  uint64_t disk_bytes = 0;
  for (int i = 0; i < n_; ++i)
    if (plan_.tiers[i] == Tier::kDisk && plan_.streamed(i)) disk_bytes += spans_[i];
  double link_bytes = static_cast<double>(ram_bytes);
  if (!disk_direct_)
    for (int i = 0; i < n_; ++i)
      if (plan_.tiers[i] == Tier::kDisk && plan_.streamed(i)) link_bytes += bytes_[i];
  PassSummary& s = st.summary;
  s.measured_s = (end - begin) * 1e-6;
  // The plan's own figure dates from when it was made, before this pass's
  // measurements (a plan kept fixed would otherwise never update it).
  Plan now = plan_;
  (void)evaluate_plan(planner_input(cls), now);
  s.predicted_s = now.predicted_pass_s;
  s.lower_bound_s = std::max({s.sum_compute_s, cost_.link_bw() > 0 ? link_bytes / cost_.link_bw() : 0.0,
                              cost_.disk_bw() > 0 ? disk_bytes / cost_.disk_bw() : 0.0});
  s.overlap_efficiency = s.measured_s > 0 ? s.lower_bound_s / s.measured_s : 0;
  LS_LOG_DEBUG("scheduler: {}", s.to_string());
}

}  // namespace layerstream::sched

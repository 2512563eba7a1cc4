// Executor: plan application. A plan is checked against the layers and
// sized against the budgets; the same placement is adopted in place;
// otherwise, with nothing in flight, the arena is re-carved (residents that
// stay keep their region and bytes), new residents and RAM-tier layers are
// loaded, the staging ring made when the staged disk path first needs it.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/executor.h"

namespace layerstream::sched {

using Clock = std::chrono::steady_clock;

// Checks `p`, then either keeps the placement (nothing moves) or drains,
// re-carves the arena, loads what is new and adopts the plan.
Status Executor::apply_plan(Plan p) {
  PlannerInput in = planner_input(p.batch_class);
  LS_RETURN_IF_ERROR(check_plan(p));
  LS_RETURN_IF_ERROR(size_plan(p, in));
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
  if (p.count(Tier::kDisk) > 0) LS_RETURN_IF_ERROR(disk_->ensure_staging_ring(dev_));
  LS_RETURN_IF_ERROR(adopt_plan(std::move(p)));
  LS_LOG_INFO("scheduler plan: {} (loaded {})", describe_plan(plan_, bytes_), format_bytes(moved + loaded));
  return Status::OK();
}

// InvalidArgument for tiers against pins and sources, and sites and splits
// against what each layer can do.
Status Executor::check_plan(const Plan& p) const {
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
  return Status::OK();
}

// Normalises slots and depth; fills slot, window, VRAM and RAM bytes;
// OutOfBudget when they do not fit the budgets in `in`.
Status Executor::size_plan(Plan& p, const PlannerInput& in) const {
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
    LS_ASSIGN_OR_RETURN(io::Reader * rd, disk_->reader_for(layers_[i].file));
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
                  format_bytes(to_load), std::chrono::duration<double>(Clock::now() - t0).count());
      last_pct = pct;
    }
  }
  return loaded;
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

}  // namespace layerstream::sched

#include "runtime/scheduler/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "layerstream/units.h"
#include "runtime/core/log.h"

namespace layerstream::sched {

using Clock = std::chrono::steady_clock;

struct Executor::DiskJob {
  uint64_t g = 0;          // global streamed index (this plan epoch)
  int layer = 0;
  void* slot = nullptr;    // direct: read destination
  uint64_t chunk0 = 0;     // staged: first chunk number
  uint64_t chunks = 0;     // staged: chunk count
  uint64_t pass = 0;
  int slot_index = 0;
};

namespace {
uint64_t aligned_begin(const LayerSpec& l) { return l.file_offset / kSlotAlignment * kSlotAlignment; }
uint64_t data_offset(const LayerSpec& l) { return l.from_file() ? l.file_offset - aligned_begin(l) : 0; }
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

Executor::Executor(Device& device, std::vector<LayerSpec> layers, ExecutorOptions options)
    : dev_(device), layers_(std::move(layers)), opt_(std::move(options)) {}

Result<std::unique_ptr<Executor>> Executor::create(Device& device, std::vector<LayerSpec> layers,
                                                   ExecutorOptions options) {
  std::unique_ptr<Executor> e(new Executor(device, std::move(layers), std::move(options)));
  LS_RETURN_IF_ERROR(e->init());
  return e;
}

Executor::~Executor() {
  {
    std::lock_guard l(dmu_);
    stop_ = true;
  }
  dcv_.notify_all();
  if (compute_) (void)compute_->synchronize();
  if (copy_) (void)copy_->synchronize();
  if (small_) (void)small_->synchronize();
  if (disk_thread_.joinable()) disk_thread_.join();
  for (auto& [path, r] : readers_) r->cancel();
}

PlannerInput Executor::planner_input(int cls) const {
  PlannerInput in;
  in.bytes = bytes_;
  in.spans = spans_;
  for (const LayerSpec& l : layers_) {
    in.from_file.push_back(l.from_file());
    in.pins.push_back(l.pin);
  }
  uint64_t reserve = round_up(opt_.reserved_vram, kSlotAlignment);
  in.vram_budget = opt_.vram_budget > reserve ? opt_.vram_budget - reserve : 0;
  in.ram_budget = opt_.ram_budget;
  in.staging_bytes = static_cast<uint64_t>(opt_.staging_buffers) * round_up(opt_.staging_buffer_bytes, 4096);
  in.cost = &cost_;
  in.batch_class = cls;
  in.disk_direct = disk_direct_;
  in.chunk_bytes = disk_direct_ ? opt_.copy_chunk_bytes : opt_.staging_buffer_bytes;
  in.max_slots = opt_.max_slots;
  in.fixed_slots = opt_.slots;
  in.fixed_depth = opt_.prefetch_depth;
  in.serial = opt_.serial;
  return in;
}

Status Executor::init() {
  n_ = static_cast<int>(layers_.size());
  if (n_ == 0) return Status::InvalidArgument("executor: no layers");
  if (opt_.copy_chunk_bytes == 0) return Status::InvalidArgument("executor: copy_chunk_bytes must be > 0");
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
  disk_direct_ = dev_.info().host_addressable && !opt_.force_staging;
  cost_ = CostModel(n_);
  for (int i = 0; i < n_; ++i) cost_.set_hint(i, layers_[i].compute_hint_s);
  std::vector<std::string> names;
  for (auto& l : layers_) names.push_back(l.name);
  trace_.set_layer_names(std::move(names));
  trace_.set_enabled(opt_.trace);

  LS_ASSIGN_OR_RETURN(compute_, dev_.create_stream(StreamRole::kCompute));
  LS_ASSIGN_OR_RETURN(copy_, dev_.create_stream(StreamRole::kCopy));
  LS_ASSIGN_OR_RETURN(small_, dev_.create_stream(StreamRole::kCopy));
  LS_ASSIGN_OR_RETURN(ref_, dev_.create_event());
  for (int p = 0; p < 2; ++p) {
    LS_ASSIGN_OR_RETURN(auto e, dev_.create_event());
    pass_begin_.push_back(std::move(e));
  }
  LS_RETURN_IF_ERROR(compute_->record(*ref_));
  LS_RETURN_IF_ERROR(ref_->synchronize());
  host_ref_ = Clock::now();

  // Budget check before anything is allocated: a plan must exist.
  uint64_t reserve = round_up(opt_.reserved_vram, kSlotAlignment);
  uint64_t max_span = *std::max_element(spans_.begin(), spans_.end());
  if (opt_.vram_budget < reserve + max_span) {
    return Status::OutOfBudget(fmt::format(
        "VRAM budget too small for one window slot plus the reserve: need {} ({} B: slot {} B + "
        "reserved {} B), available {} ({} B)",
        format_bytes(reserve + max_span), reserve + max_span, max_span, reserve,
        format_bytes(opt_.vram_budget), opt_.vram_budget));
  }
  // Plan with hints first to validate budgets, so errors come before I/O.
  {
    PlannerInput in = planner_input(0);
    if (opt_.plan) {
      Plan p = *opt_.plan;
      if (p.tiers.size() != static_cast<size_t>(n_))
        return Status::InvalidArgument(fmt::format("requested plan has {} tiers for {} layers", p.tiers.size(), n_));
    } else {
      auto r = make_plan(in);
      if (!r.ok()) return r.status().WithContext("cannot place the layers");
    }
  }
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

Result<io::Reader*> Executor::reader_for(const std::string& path) {
  auto it = readers_.find(path);
  if (it != readers_.end()) return it->second.get();
  LS_ASSIGN_OR_RETURN(auto r, io::open_reader(path, opt_.reader));
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
  load_bytes_ += l.bytes;
  load_done_ += l.bytes;
  if (opt_.load_progress && !opt_.load_progress(load_done_, std::max(load_total_, load_done_)))
    return Status::Cancelled(fmt::format("loading was cancelled after {} of {}", format_bytes(load_done_),
                                         format_bytes(std::max(load_total_, load_done_))));
  return Status::OK();
}

Status Executor::drain() {
  Status s1 = copy_->synchronize();
  Status s2 = compute_->synchronize();
  {
    std::unique_lock l(dmu_);
    dcv_.wait(l, [&] { return jobs_.empty() || !disk_error_.ok(); });
  }
  if (!s1.ok()) return s1;
  if (!s2.ok()) return s2;
  std::lock_guard l(dmu_);
  return disk_error_;
}

Status Executor::apply_plan(Plan p) {
  if (p.tiers.size() != static_cast<size_t>(n_))
    return Status::InvalidArgument(fmt::format("plan has {} tiers for {} layers", p.tiers.size(), n_));
  for (int i = 0; i < n_; ++i) {
    if (layers_[i].pin && *layers_[i].pin != p.tiers[i])
      return Status::InvalidArgument(fmt::format("plan puts layer {} ({}) in tier {} but it is pinned to {}", i,
                                                 layers_[i].name, tier_name(p.tiers[i]), tier_name(*layers_[i].pin)));
    if (p.tiers[i] == Tier::kDisk && !layers_[i].from_file())
      return Status::InvalidArgument(fmt::format("plan puts layer {} ({}) on disk but it has no file", i, layers_[i].name));
  }
  PlannerInput in = planner_input(p.batch_class);
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
  bool any_disk = false;
  for (int i = 0; i < n_; ++i) {
    if (p.tiers[i] == Tier::kResident) p.vram_bytes += round_up(bytes_[i], kSlotAlignment);
    else p.slot_bytes = std::max(p.slot_bytes, spans_[i]);
    if (p.tiers[i] == Tier::kRam) p.ram_bytes += bytes_[i];
    if (p.tiers[i] == Tier::kDisk) any_disk = true;
  }
  p.vram_bytes += p.slot_bytes * p.slots;
  if (any_disk && !disk_direct_) p.ram_bytes += in.staging_bytes;
  if (p.vram_bytes > in.vram_budget)
    return Status::OutOfBudget(fmt::format(
        "placement needs {} ({} B) of VRAM for residents and {} slot(s), available {} ({} B) after reserving {} B",
        format_bytes(p.vram_bytes), p.vram_bytes, p.slots, format_bytes(in.vram_budget), in.vram_budget,
        opt_.reserved_vram));
  if (p.ram_bytes > in.ram_budget)
    return Status::OutOfBudget(fmt::format("placement needs {} ({} B) of pinned RAM, available {} ({} B)",
                                           format_bytes(p.ram_bytes), p.ram_bytes, format_bytes(in.ram_budget),
                                           in.ram_budget));
  evaluate_plan(in, p);
  load_done_ = 0;
  load_total_ = 0;
  for (int i = 0; i < n_; ++i) {  // what the loads below read (progress)
    const bool in_ram = i < static_cast<int>(ram_.size()) && ram_[i].data();
    if ((p.tiers[i] == Tier::kResident && !in_ram && !layers_[i].host_data) || (p.tiers[i] == Tier::kRam && !in_ram))
      load_total_ += bytes_[i];
  }

  LS_RETURN_IF_ERROR(drain());
  // Re-carve the arena (bookkeeping only: no device allocation).
  for (auto& r : slot_) arena_->free(r);
  slot_.clear();
  std::vector<ArenaRegion> old_res = std::move(resident_);
  resident_.assign(n_, ArenaRegion{});
  for (auto& r : old_res)
    if (r.ptr) arena_->free(r);
  for (int i = 0; i < n_; ++i) {
    if (p.tiers[i] != Tier::kResident) continue;
    LS_ASSIGN_OR_RETURN(resident_[i], arena_->allocate(layers_[i].name, bytes_[i], kSlotAlignment));
  }
  for (int s = 0; s < p.slots; ++s) {
    LS_ASSIGN_OR_RETURN(ArenaRegion r, arena_->allocate(fmt::format("slot{}", s), p.slot_bytes, kSlotAlignment));
    slot_.push_back(r);
  }
  // Residents: from the RAM copy when there is one, else the source.
  HostBuffer bounce;
  for (int i = 0; i < n_; ++i) {
    if (p.tiers[i] != Tier::kResident) continue;
    const void* src = nullptr;
    if (i < static_cast<int>(ram_.size()) && ram_[i].data()) src = ram_[i].data();
    else if (layers_[i].host_data) src = layers_[i].host_data;
    else if (dev_.info().host_addressable) {
      LS_RETURN_IF_ERROR(load_layer_to_host(i, resident_[i].ptr));
      continue;
    } else {
      if (bounce.size() < bytes_[i]) {
        bounce.reset();
        LS_ASSIGN_OR_RETURN(bounce, dev_.alloc_pinned(bytes_[i]));
      }
      LS_RETURN_IF_ERROR(load_layer_to_host(i, bounce.data()));
      src = bounce.data();
    }
    LS_RETURN_IF_ERROR(copy_->copy_h2d(resident_[i].ptr, src, bytes_[i]));
    LS_RETURN_IF_ERROR(copy_->synchronize());
  }
  bounce.reset();
  // RAM tier: loaded once; buffers of layers that left the tier are freed.
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
  // Staging ring for staged disk reads.
  if (any_disk && !disk_direct_ && !ring_) {
    io::StagingRingOptions ro;
    ro.buffer_bytes = round_up(opt_.staging_buffer_bytes, 4096);
    ro.buffer_count = opt_.staging_buffers;
    ro.pin = [this](void* d, size_t b) { return dev_.register_host(d, b); };
    LS_ASSIGN_OR_RETURN(ring_, io::StagingRing::create(ro));
  }

  plan_ = std::move(p);
  streamed_.clear();
  stream_index_.assign(n_, -1);
  for (int i = 0; i < n_; ++i)
    if (plan_.tiers[i] != Tier::kResident) {
      stream_index_[i] = static_cast<int>(streamed_.size());
      streamed_.push_back(i);
    }
  LS_RETURN_IF_ERROR(create_events());
  plan_compute_ = cost_.compute_all(plan_.batch_class);
  plan_measured_ = cost_.fully_measured(plan_.batch_class);
  epoch_pass_ = pass_;
  g_compute_ = g_copy_ = 0;
  {
    std::lock_guard l(dmu_);
    computed_ = disk_loaded_ = chunks_read_ = chunks_copied_ = 0;
  }
  chunk_seq_ = 0;
  LS_LOG_INFO("scheduler plan: {}", describe_plan(plan_, bytes_));
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
  LS_RETURN_IF_ERROR(fill(loaded_, plan_.slots));
  LS_RETURN_IF_ERROR(fill(done_, plan_.slots));
  for (int p = 0; p < 2; ++p) {
    LS_RETURN_IF_ERROR(fill(c_start_[p], n_));
    LS_RETURN_IF_ERROR(fill(c_end_[p], n_));
    LS_RETURN_IF_ERROR(fill(k_start_[p], streamed_.size()));
    LS_RETURN_IF_ERROR(fill(k_end_[p], streamed_.size()));
  }
  return Status::OK();
}

Status Executor::wait_counter(uint64_t& counter, uint64_t at_least) {
  std::unique_lock l(dmu_);
  dcv_.wait(l, [&] { return counter >= at_least || stop_ || !disk_error_.ok(); });
  if (!disk_error_.ok()) return disk_error_;
  if (counter < at_least) return Status::Cancelled("executor shutting down");
  return Status::OK();
}

Status Executor::enqueue_copy(uint64_t g) {
  const uint64_t m = streamed_.size();
  const int k = static_cast<int>(g % m);
  const int i = streamed_[k];
  const int s = static_cast<int>(g % plan_.slots);
  const int W = plan_.window();
  const uint64_t pass = epoch_pass_ + g / m;
  const int par = static_cast<int>(pass & 1);
  const LayerSpec& l = layers_[i];
  uint8_t* slot = static_cast<uint8_t*>(slot_[s].ptr);
  if (g >= static_cast<uint64_t>(W)) LS_RETURN_IF_ERROR(copy_->wait(*done_[(g - W) % plan_.slots]));
  LS_RETURN_IF_ERROR(copy_->record(*k_start_[par][k]));
  copy_->range_push(l.name.c_str());
  if (plan_.tiers[i] == Tier::kRam) {
    const uint8_t* src = static_cast<const uint8_t*>(ram_[i].data());
    uint8_t* dst = slot + data_offset(l);
    for (uint64_t off = 0; off < l.bytes; off += opt_.copy_chunk_bytes)
      LS_RETURN_IF_ERROR(copy_->copy_h2d(dst + off, src + off, std::min(opt_.copy_chunk_bytes, l.bytes - off)));
  } else if (disk_direct_) {
    {
      std::lock_guard lk(dmu_);
      jobs_.push_back({g, i, slot, 0, 0, pass, s});
    }
    dcv_.notify_all();
    LS_RETURN_IF_ERROR(copy_->host_func([this, g] { return wait_counter(disk_loaded_, g + 1); }));
  } else {
    const uint64_t span = spans_[i], cb = ring_->buffer_bytes();
    const uint64_t chunks = (span + cb - 1) / cb, q0 = chunk_seq_;
    chunk_seq_ += chunks;
    {
      std::lock_guard lk(dmu_);
      jobs_.push_back({g, i, nullptr, q0, chunks, pass, s});
    }
    dcv_.notify_all();
    const unsigned R = ring_->buffer_count();
    for (uint64_t c = 0; c < chunks; ++c) {
      const uint64_t q = q0 + c;
      LS_RETURN_IF_ERROR(copy_->host_func([this, q] { return wait_counter(chunks_read_, q + 1); }));
      const iovec& buf = ring_->iovecs()[q % R];
      LS_RETURN_IF_ERROR(copy_->copy_h2d(slot + c * cb, buf.iov_base, std::min(cb, span - c * cb)));
      LS_RETURN_IF_ERROR(copy_->host_func([this, q] {
        {
          std::lock_guard lk(dmu_);
          chunks_copied_ = q + 1;
        }
        dcv_.notify_all();
        return Status::OK();
      }));
    }
  }
  copy_->range_pop();
  LS_RETURN_IF_ERROR(copy_->record(*k_end_[par][k]));
  return copy_->record(*loaded_[s]);
}

void Executor::disk_thread_main() {
  for (;;) {
    DiskJob job;
    {
      std::unique_lock l(dmu_);
      dcv_.wait(l, [&] { return stop_ || (!jobs_.empty() && disk_error_.ok()); });
      if (stop_) return;
      job = jobs_.front();
    }
    const LayerSpec& l = layers_[job.layer];
    Status st;
    auto t0 = Clock::now();
    const uint64_t begin = aligned_begin(l), span = spans_[job.layer];
    io::Reader* rd = readers_.at(l.file).get();
    auto read = [&](uint64_t off, uint64_t bytes, void* dst) -> Status {
      LS_RETURN_IF_ERROR(rd->submit({off, bytes, dst, job.g}));
      io::ReadCompletion c;
      LS_ASSIGN_OR_RETURN(size_t got, rd->wait(std::span<io::ReadCompletion>(&c, 1)));
      if (got != 1) return Status::Internal("reader returned no completion");
      LS_RETURN_IF_ERROR(c.status);
      if (off + c.bytes_read < l.file_offset + l.bytes && c.bytes_read < bytes)
        return Status::IOError(fmt::format("{}: short read of layer {} at offset {} ({} of {} bytes)", l.file,
                                           job.layer, off, c.bytes_read, bytes));
      return Status::OK();
    };
    // The layer's sample and trace event, recorded (under dmu_) in the same
    // critical section that publishes its last bytes, so the pass that
    // computes the layer always collects them.
    auto record_read = [&] {
      const auto t1 = Clock::now();
      disk_samples_.push_back({span, std::chrono::duration<double>(t1 - t0).count()});
      auto us = [&](Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - host_ref_).count(); };
      disk_trace_.push_back({TraceKind::kDiskRead, job.layer, job.slot_index, job.pass, us(t0), us(t1), span});
    };
    if (job.slot) {
      // Direct: the slot must be free (compute of g - W finished).
      const uint64_t W = plan_.window();
      if (job.g >= W) st = wait_counter(computed_, job.g - W + 1);
      t0 = Clock::now();
      if (st.ok()) st = read(begin, span, job.slot);
      if (st.ok()) {
        std::lock_guard lk(dmu_);
        record_read();
        disk_loaded_ = job.g + 1;
      }
    } else {
      const unsigned R = ring_->buffer_count();
      const uint64_t cb = ring_->buffer_bytes();
      for (uint64_t c = 0; c < job.chunks && st.ok(); ++c) {
        const uint64_t q = job.chunk0 + c;
        if (q >= R) st = wait_counter(chunks_copied_, q - R + 1);
        if (c == 0) t0 = Clock::now();
        if (st.ok()) st = read(begin + c * cb, std::min(cb, span - c * cb), ring_->iovecs()[q % R].iov_base);
        if (st.ok()) {
          {
            std::lock_guard lk(dmu_);
            if (c + 1 == job.chunks) record_read();
            chunks_read_ = q + 1;
          }
          dcv_.notify_all();
        }
      }
    }
    {
      std::lock_guard lk(dmu_);
      if (!st.ok() && disk_error_.ok() && !st.IsCancelled())
        disk_error_ = st.WithContext(fmt::format("disk read of layer {} ({})", job.layer, l.name));
      jobs_.pop_front();
    }
    dcv_.notify_all();
  }
}

Status Executor::run_pass(int batch_tokens) {
  if (batch_tokens < 1) return Status::InvalidArgument(fmt::format("run_pass: batch_tokens must be >= 1, got {}", batch_tokens));
  const int cls = batch_class(batch_tokens);
  if (opt_.auto_replan && !opt_.plan && cls != plan_.batch_class) {
    LS_LOG_INFO("scheduler: batch class {} -> {}, re-planning", plan_.batch_class, cls);
    PlannerInput in = planner_input(cls);
    LS_ASSIGN_OR_RETURN(Plan p, make_plan(in));
    LS_RETURN_IF_ERROR(apply_plan(std::move(p)));
    ++replans_;
  }
  const uint64_t pass = pass_;
  const int par = static_cast<int>(pass & 1);
  const uint64_t W = plan_.window();
  const bool disk_counters = disk_direct_ && plan_.count(Tier::kDisk) > 0;
  LS_RETURN_IF_ERROR(compute_->record(*pass_begin_[par]));
  for (int i = 0; i < n_; ++i) {
    LayerRun run;
    run.layer = i;
    run.pass = pass;
    run.bytes = bytes_[i];
    run.tier = plan_.tiers[i];
    run.batch_tokens = batch_tokens;
    uint64_t g = 0;
    if (stream_index_[i] >= 0) {
      g = g_compute_++;
      while (g_copy_ < g + W) LS_RETURN_IF_ERROR(enqueue_copy(g_copy_++));
      run.slot = static_cast<int>(g % plan_.slots);
      run.data = static_cast<uint8_t*>(slot_[run.slot].ptr) + data_offset(layers_[i]);
      LS_RETURN_IF_ERROR(compute_->wait(*loaded_[run.slot]));
    } else {
      run.data = resident_[i].ptr;
    }
    LS_RETURN_IF_ERROR(compute_->record(*c_start_[par][i]));
    compute_->range_push(layers_[i].name.c_str());
    Status st = layers_[i].compute(run, *compute_);
    compute_->range_pop();
    if (!st.ok()) {
      (void)drain();
      return st.WithContext(fmt::format("compute of layer {} ({}) in pass {}", i, layers_[i].name, pass));
    }
    LS_RETURN_IF_ERROR(compute_->record(*c_end_[par][i]));
    if (run.slot >= 0) {
      LS_RETURN_IF_ERROR(compute_->record(*done_[run.slot]));
      if (disk_counters) {
        LS_RETURN_IF_ERROR(compute_->host_func([this, g] {
          {
            std::lock_guard lk(dmu_);
            computed_ = g + 1;
          }
          dcv_.notify_all();
          return Status::OK();
        }));
      }
    }
  }
  // Cyclic prefetch: the next pass's first streamed layers load now.
  if (!streamed_.empty())
    while (g_copy_ < g_compute_ + W) LS_RETURN_IF_ERROR(enqueue_copy(g_copy_++));
  Status st = compute_->synchronize();
  if (!st.ok()) {
    std::lock_guard lk(dmu_);
    return disk_error_.ok() ? st : disk_error_;
  }
  LS_RETURN_IF_ERROR(collect_pass(pass, cls));
  ++pass_;
  if (opt_.auto_replan && !opt_.plan) {
    bool warm = pass_ - epoch_pass_ >= static_cast<uint64_t>(opt_.warmup_passes);
    if (warm && ((!plan_measured_ && cost_.fully_measured(cls)) || (plan_measured_ && drifted(cls)))) {
      LS_ASSIGN_OR_RETURN(bool changed, replan());
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

Result<bool> Executor::replan() {
  PlannerInput in = planner_input(plan_.batch_class);
  LS_ASSIGN_OR_RETURN(Plan p, make_plan(in));
  ++replans_;
  if (p.tiers == plan_.tiers && p.slots == plan_.slots && p.prefetch_depth == plan_.prefetch_depth) {
    plan_.predicted_pass_s = p.predicted_pass_s;
    plan_.lower_bound_s = p.lower_bound_s;
    plan_compute_ = cost_.compute_all(plan_.batch_class);
    plan_measured_ = cost_.fully_measured(plan_.batch_class);
    LS_LOG_DEBUG("scheduler: re-plan keeps the plan; predicted pass {:.3f} ms, bound {:.3f} ms",
                plan_.predicted_pass_s * 1e3, plan_.lower_bound_s * 1e3);
    return false;
  }
  LS_RETURN_IF_ERROR(apply_plan(std::move(p)));
  return true;
}

Status Executor::collect_pass(uint64_t pass, int cls) {
  const int par = static_cast<int>(pass & 1);
  auto us = [&](const Event& e) -> Result<double> {
    LS_ASSIGN_OR_RETURN(double ms, e.elapsed_ms_since(*ref_));
    return ms * 1e3;
  };
  PassStats st;
  st.compute_s.assign(n_, 0);
  st.summary.pass = pass;
  st.summary.stall_s.assign(n_, 0);
  LS_ASSIGN_OR_RETURN(double begin, us(*pass_begin_[par]));
  double prev_end = begin, end = begin;
  uint64_t ram_bytes = 0;
  for (int i = 0; i < n_; ++i) {
    LS_ASSIGN_OR_RETURN(double a, us(*c_start_[par][i]));
    LS_ASSIGN_OR_RETURN(double b, us(*c_end_[par][i]));
    double c = std::max(0.0, b - a) * 1e-6;
    st.compute_s[i] = c;
    if (pass > 0) cost_.record_compute(i, cls, c);  // pass 0 is cold (first touch): not a sample
    st.summary.sum_compute_s += c;
    double stall = std::max(0.0, a - prev_end);
    st.summary.stall_s[i] = stall * 1e-6;
    const int k = stream_index_[i];
    const int slot = k >= 0 ? static_cast<int>(((pass - epoch_pass_) * streamed_.size() + k) % plan_.slots) : -1;
    trace_.add({TraceKind::kCompute, i, slot, pass, a, b, 0});
    if (stall > 1.0) trace_.add({TraceKind::kStall, i, -1, pass, prev_end, a, 0});
    if (k >= 0) {
      LS_ASSIGN_OR_RETURN(double ka, us(*k_start_[par][k]));
      LS_ASSIGN_OR_RETURN(double kb, us(*k_end_[par][k]));
      st.summary.streamed_bytes += bytes_[i];
      if (plan_.tiers[i] == Tier::kRam) {
        ram_bytes += bytes_[i];
        if (pass > 0) cost_.record_link(bytes_[i], (kb - ka) * 1e-6);
        trace_.add({TraceKind::kCopy, i, slot, pass, ka, kb, bytes_[i]});
      } else if (!disk_direct_) {
        trace_.add({TraceKind::kCopy, i, slot, pass, ka, kb, bytes_[i]});
      }
    }
    prev_end = b;
    end = b;
  }
  std::vector<std::pair<uint64_t, double>> ds;
  std::vector<TraceEvent> dt;
  {
    std::lock_guard lk(dmu_);
    ds.swap(disk_samples_);
    dt.swap(disk_trace_);
  }
  uint64_t disk_bytes = 0;
  for (auto& [b, s] : ds) cost_.record_disk(b, s);
  for (auto& e : dt) trace_.add(e);
  for (int i = 0; i < n_; ++i)
    if (plan_.tiers[i] == Tier::kDisk) disk_bytes += spans_[i];
  double link_bytes = static_cast<double>(ram_bytes);
  if (!disk_direct_)
    for (int i = 0; i < n_; ++i)
      if (plan_.tiers[i] == Tier::kDisk) link_bytes += bytes_[i];
  PassSummary& s = st.summary;
  s.measured_s = (end - begin) * 1e-6;
  // The simulator's prediction for the plan in force under the costs measured
  // so far; the plan's own figure dates from when it was made, before this
  // pass's measurements (a plan kept fixed would otherwise never update it).
  Plan now = plan_;
  (void)evaluate_plan(planner_input(cls), now);
  s.predicted_s = now.predicted_pass_s;
  s.lower_bound_s = std::max({s.sum_compute_s, cost_.link_bw() > 0 ? link_bytes / cost_.link_bw() : 0.0,
                              cost_.disk_bw() > 0 ? disk_bytes / cost_.disk_bw() : 0.0});
  s.overlap_efficiency = s.measured_s > 0 ? s.lower_bound_s / s.measured_s : 0;
  LS_LOG_DEBUG("scheduler: {}", s.to_string());
  last_ = std::move(st);
  return Status::OK();
}

}  // namespace layerstream::sched

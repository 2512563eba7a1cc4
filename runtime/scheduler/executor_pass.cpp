// Executor: the pass loop. Each layer's compute is enqueued in order (a
// streamed layer's after its load; host-site layers on the host lane, the
// activations crossing around them), with the loads of the streamed layers
// ahead of it: RAM-tier copies on the copy stream, disk-tier layers handed to
// the disk loader. The hot path: nothing here allocates per layer beyond
// what the layer's callback does.
#include <fmt/format.h>

#include <algorithm>

#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/executor.h"

namespace layerstream::sched {
namespace {
// Where a layer's bytes start in its region: the region holds the aligned
// superset of a file-backed layer's span.
uint64_t data_offset(const LayerSpec& l) {
  return l.from_file() ? l.file_offset - l.file_offset / kSlotAlignment * kSlotAlignment : 0;
}

// What layer i's compute callback is told of its run in `pass`.
LayerRun layer_run(int i, uint64_t pass, int batch_tokens, uint64_t bytes, Tier tier) {
  LayerRun run;
  run.layer = i;
  run.pass = pass;
  run.bytes = bytes;
  run.tier = tier;
  run.batch_tokens = batch_tokens;
  return run;
}
}  // namespace

// A re-plan when the batch class changed, each layer's compute in order
// (waiting for its load when it streams), then the end of the pass.
Status Executor::run_pass(int batch_tokens) {
  if (batch_tokens < 1) return Status::InvalidArgument(fmt::format("run_pass: batch_tokens must be >= 1, got {}", batch_tokens));
  const int cls = batch_class(batch_tokens);
  LS_RETURN_IF_ERROR(disk_->error());
  if (opt_.auto_replan && !opt_.plan && cls != plan_.batch_class) LS_RETURN_IF_ERROR(replan_for_class(cls));
  // Nothing streams, so nothing overlaps the compute: the host backend runs
  // the compute stream's work on this thread, and the pass ends without a
  // hand-off to its worker and a wake-up of this thread (measured at 4-30% of
  // a small model's decode pass on a loaded 2-core box).
  (void)compute_->set_run_on_caller(streamed_.empty());
  const uint64_t pass = pass_;
  cross_rec_[pass & 1][0] = cross_rec_[pass & 1][1] = false;  // a failed pass may have left them set
  LS_RETURN_IF_ERROR(compute_->record(*pass_begin_[pass & 1]));
  LS_RETURN_IF_ERROR(run_layers(pass, batch_tokens));
  return finish_pass(pass, cls);
}

// The batch class changed: a plan for the new class (only what differs moves).
Status Executor::replan_for_class(int cls) {
  LS_LOG_INFO("scheduler: batch class {} -> {}, re-planning", plan_.batch_class, cls);
  PlannerInput in = planner_input(cls);
  LS_ASSIGN_OR_RETURN(Plan p, make_plan(in));
  const bool moves = !same_placement(p);
  LS_RETURN_IF_ERROR(apply_plan(std::move(p)));
  replan_gate_.reset();
  if (moves) ++replans_;
  return Status::OK();
}

// Every layer of `pass` in order; the activations follow the layers' sites
// (to the host before a run of host-site layers, back after it).
Status Executor::run_layers(uint64_t pass, int batch_tokens) {
  bool on_host = false;  // where the activations are
  for (int i = 0; i < n_; ++i) {
    if (plan_.site(i) == Site::kHost) {
      LS_RETURN_IF_ERROR(run_host_site_layer(i, pass, batch_tokens, /*entering=*/!on_host));
      on_host = true;
      continue;
    }
    if (on_host) {
      on_host = false;
      LS_RETURN_IF_ERROR(leave_host_site(pass, batch_tokens, i));
    }
    LS_RETURN_IF_ERROR(run_layer(i, pass, batch_tokens));
  }
  if (on_host) LS_RETURN_IF_ERROR(leave_host_site(pass, batch_tokens, -1));
  return Status::OK();
}

// Host-site layer i on the host lane; a failure drains and names the layer.
Status Executor::run_host_site_layer(int i, uint64_t pass, int batch_tokens, bool entering) {
  LayerRun run = layer_run(i, pass, batch_tokens, bytes_[i], plan_.tiers[i]);
  if (Status st = run_host_layer(run, entering); !st.ok()) {
    (void)drain();
    return st.WithContext(fmt::format("host compute of layer {} ({}) in pass {}", i, layers_[i].name, pass));
  }
  return Status::OK();
}

// The activations back from the host lane before device layer `next` (-1:
// at the end of the pass); a failure drains and says where.
Status Executor::leave_host_site(uint64_t pass, int batch_tokens, int next) {
  if (Status st = leave_host_lane(pass, batch_tokens); !st.ok()) {
    (void)drain();
    return st.WithContext(next < 0 ? fmt::format("host lane at the end of pass {}", pass)
                                   : fmt::format("host lane before layer {} ({}) in pass {}", next,
                                                 layers_[next].name, pass));
  }
  return Status::OK();
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
  LayerRun run = layer_run(i, pass, batch_tokens, bytes_[i], plan_.tiers[i]);
  uint64_t g = 0;
  if (stream_index_[i] >= 0) {
    g = g_compute_++;
    LS_RETURN_IF_ERROR(enqueue_ready_copies(g));
    run.slot = static_cast<int>(g % plan_.slots);
    run.data = static_cast<uint8_t*>(window_.ptr) + window_schedule_.at(g).offset + data_offset(layers_[i]);
    if (plan_.tiers[i] == Tier::kDisk) {
      if (Status st = disk_->wait_ready(g); !st.ok()) {
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
  if (staged_disk) disk_->set_done_recorded(g + 1);
  if (disk_counters) {
    DiskLoader* disk = disk_.get();
    LS_RETURN_IF_ERROR(compute_->host_func([disk, g] {
      disk->set_computed(g + 1);
      return Status::OK();
    }));
  }
  return Status::OK();
}

// The next pass's first streamed layers start loading (cyclic prefetch); the
// pass completes and is collected; a re-plan when one is due.
Status Executor::finish_pass(uint64_t pass, int cls) {
  // Cyclic prefetch: the next pass's first streamed layers load now.
  if (!streamed_.empty()) LS_RETURN_IF_ERROR(enqueue_ready_copies(g_compute_));
  Status st = compute_->synchronize();
  if (!st.ok()) {
    Status disk = disk_->error();
    return disk.ok() ? st : disk;
  }
  LS_RETURN_IF_ERROR(collect_pass(pass, cls));
  ++pass_;
  if (opt_.auto_replan && !opt_.plan) LS_RETURN_IF_ERROR(replan_if_due(cls));
  return Status::OK();
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
    if (staged_disk ? g >= computing + L : (g >= computing + W || window_schedule_.at(g).need >= static_cast<int64_t>(computing)))
      break;
    LS_RETURN_IF_ERROR(enqueue_copy(g_copy_++));
  }
  if (computing > 0) window_schedule_.forget_before(std::min(g_copy_, computing - 1));  // keep those still needed
  return Status::OK();
}

void Executor::post_disk_job(uint64_t g, int layer, uint8_t* dst, int64_t need, uint64_t pass, int slot, int k) {
  const int E = events_per_ring();
  const int par = static_cast<int>(pass & 1);
  DiskJob job{g, layer, dst, need, pass, slot, k};
  job.loaded = loaded_[g % E].get();
  job.need_done = need >= 0 ? done_[need % E].get() : nullptr;
  job.k_start = k_start_[par][k].get();
  job.k_end = k_end_[par][k].get();
  disk_->post(job);
}

Status Executor::enqueue_copy(uint64_t g) {
  const uint64_t m = streamed_.size();
  const int k = static_cast<int>(g % m);
  const int i = streamed_[k];
  const int E = events_per_ring();
  const uint64_t pass = epoch_pass_ + g / m;
  const int par = static_cast<int>(pass & 1);
  const LayerSpec& l = layers_[i];
  const WindowSchedule::Placed pl = window_schedule_.at(g);
  uint8_t* region = static_cast<uint8_t*>(window_.ptr) + pl.offset;
  const int slot = static_cast<int>(g % plan_.slots);
  if (plan_.tiers[i] == Tier::kDisk) {
    post_disk_job(g, i, region, pl.need, pass, slot, k);
    return Status::OK();
  }
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

}  // namespace layerstream::sched

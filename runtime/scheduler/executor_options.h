// The executor's options: budgets, placement overrides, re-plan policy, the
// disk path's staging, and the caller's hooks (executor.h). Plain data.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "io/reader.h"
#include "layerstream/status.h"
#include "runtime/scheduler/plan.h"
#include "runtime/scheduler/planner.h"

namespace layerstream {
class Stream;
}

namespace layerstream::sched {

struct ExecutorOptions {
  uint64_t vram_budget = 0;        // device bytes the executor may use (the arena size)
  uint64_t ram_budget = 0;         // pinned host bytes for RAM-tier layers and staging
  uint64_t reserved_vram = 0;      // carved first for the caller (KV cache, activations)
  bool serial = false;             // baseline: one slot, load then compute, no prefetch
  int slots = 0;                   // > 0: force the slot count
  int prefetch_depth = -1;         // >= 0: force the prefetch depth
  int max_slots = 8;
  std::optional<Plan> plan;        // use these tiers/slots instead of planning (validated)
  bool auto_replan = true;         // re-plan after warm-up and on drift
  int warmup_passes = 1;
  double drift_threshold = 0.2;    // relative change of a layer's compute / the predicted pass time that counts as drift
  // Hysteresis (replan_gate.h): a re-plan is tried only after this many
  // consecutive drifted warm passes, and a new placement is applied only when
  // it predicts a pass at least replan_min_gain faster than the current one
  // under the same costs (otherwise the plan's figures are refreshed in place).
  int drift_passes = 3;
  double replan_min_gain = 0.05;
  int replan_confirmations = 2;  // drift re-plans in a row that must propose the same placement
  double link_gbps = 0;            // H2D bandwidth (GB/s); 0 = probe at start-up
  double disk_gbps = 0;            // disk bandwidth (GB/s); 0 = probe at start-up (when a layer is on disk)
  uint64_t copy_chunk_bytes = 8 << 20;  // RAM-tier H2D copies, bytes per copy call
  bool force_staging = false;      // read disk layers through the staging buffers even when host-addressable
  // Staged disk path: pinned staging buffers (their own allocation, not part
  // of ram_budget), one read request each; reads in flight <= staging_buffers.
  uint64_t staging_buffer_bytes = 4 << 20;
  unsigned staging_buffers = 24;
  // Staged disk path: disk layers are handed to the disk thread up to this
  // many streamed layers beyond the window, so reads run ahead into the
  // staging buffers (a read needs no window region; only its copy does).
  int read_ahead_layers = 8;
  io::ReaderOptions reader;
  bool trace = true;
  // Called after each layer loaded into the resident or RAM tier with the
  // bytes loaded so far and the bytes this placement loads; returning false
  // cancels (create/apply_plan return Cancelled).
  std::function<bool(uint64_t loaded, uint64_t total)> load_progress;
  // Hybrid execution (host_lane.cpp). The planner's site policy, and an
  // override of the host compute estimate before measurement, as a multiple
  // of the device estimate (0 = none: host_factor_before_measurement in
  // planner_input.h says what the executor predicts instead).
  HostPolicy host_policy = HostPolicy::kNever;
  double host_compute_factor = 0;
  // Enqueue on the device compute stream the copy of the pass's activations
  // to host memory (before a run of host-site layers) and back (after it).
  // Required when a plan has host sites.
  std::function<Status(Stream& device_compute, int batch_tokens)> activations_to_host, activations_to_device;
  // Called by apply_plan with nothing in flight, before a plan takes effect
  // (`from` has no tiers for the first plan): moves per-layer state that
  // follows a layer's site (a host-site layer's KV cache lives on the host).
  std::function<Status(const Plan& from, const Plan& to)> on_plan_change;
};

}  // namespace layerstream::sched

// Simulator: an event simulation of the executor's streams over consecutive
// passes of one plan, predicting the steady-state pass time and every stall.
//
// The model mirrors the executor exactly (executor.h):
// - compute runs layers in order; a streamed layer starts when its copy has
//   finished ("loaded") and the previous layer's compute has;
// - the copy stream loads streamed layers in order, across pass boundaries;
//   streamed layer g (counted over all passes) may start loading once the
//   copy of g-1 is done and the compute of streamed layer g - W finished
//   (W = prefetch depth + 1: the prefetch limit) and, when the window is a
//   ring of variable-size regions (window_bytes > 0), the compute of the
//   latest earlier layer whose region it overwrites (window_ring.h);
// - a disk layer is first read by the disk thread (in order over disk
//   layers). Direct reads (host-addressable device) go into the slot, so they
//   wait for the slot like a copy and need no H2D; staged reads go into the
//   staging buffers up to W - 1 layers ahead of the copies, and the H2D copy
//   of the layer ends no earlier than one chunk after its read ends. (The
//   executor hands disk layers over further ahead, so reads may run ahead
//   as far as the staging buffers allow: the simulator is conservative there.)
// - host-site layers (hybrid execution) take their place in pass order on
//   the host lane: they start when the previous layer is done, and the
//   copies of streamed layers go on while they compute.
// Units: seconds.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/scheduler/cost_model.h"
#include "runtime/scheduler/plan.h"

namespace layerstream::sched {

struct SimLayer {
  double compute_s = 0;  // kHost: host compute plus the activation crossings around it
  Tier tier = Tier::kResident;
  double link_s = 0;   // H2D copy time (RAM tier; staged disk tier)
  double disk_s = 0;   // disk read time (disk tier)
  uint64_t span = 0;   // bytes the layer takes in the window (window_bytes > 0)
  // kHost: computed on the host lane in pass order; no copy and no window
  // region (the copy stream keeps loading streamed layers meanwhile).
  // kSplit: streamed like a device layer (its span in the window, link_s for
  // its device bytes only); compute_s covers both halves and their joins.
  Site site = Site::kDevice;
};

struct SimOptions {
  int slots = 2;
  int prefetch_depth = 1;
  bool disk_direct = false;    // disk reads go straight into the slot
  double chunk_link_s = 0;     // staged disk: H2D time of the last chunk after its read
  uint64_t window_bytes = 0;   // > 0: the window is a WindowRing of this size (spans from SimLayer)
  int passes = 3;              // >= 2; the last one is reported
};

struct SimResult {
  double pass_s = 0;                 // steady-state pass time (last pass)
  double lower_bound_s = 0;          // max(sum compute, sum H2D, sum disk)
  double sum_compute_s = 0;
  double sum_link_s = 0;
  double sum_disk_s = 0;
  std::vector<double> stall_s;       // per layer, compute waiting for its load (last pass)
  double total_stall_s() const;
};

SimResult simulate(const std::vector<SimLayer>& layers, const SimOptions& options);

// Builds the simulator's input for a plan from layer sizes and the cost model
// (`spans` are the bytes a disk read moves; `chunk_bytes` the staging chunk).
std::vector<SimLayer> make_sim_layers(const std::vector<uint64_t>& bytes,
                                      const std::vector<uint64_t>& spans,
                                      const std::vector<Tier>& tiers, const CostModel& cost,
                                      int batch_class, bool disk_direct,
                                      const std::vector<Site>& sites = {},
                                      const std::vector<double>& device_rows = {},
                                      const std::vector<uint64_t>& split_bytes = {});

}  // namespace layerstream::sched

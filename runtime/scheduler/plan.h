// A placement plan: each layer's tier, the window (slots, prefetch depth) and
// what the simulator predicted for it. Produced by the planner (planner.h),
// executed by the Executor (executor.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/scheduler/layer.h"

namespace layerstream::sched {

// Slots and resident regions are carved at this alignment (covers O_DIRECT).
inline constexpr uint64_t kSlotAlignment = 4096;

inline uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct Plan {
  std::vector<Tier> tiers;        // one per layer
  // One per layer, or empty (= every layer on the device). A host-site layer
  // takes no VRAM and no window region: its tier says where its host bytes
  // come from (kRam: RAM copy, kDisk: read each pass).
  std::vector<Site> sites;
  // Per layer (or empty): a kSplit layer's fraction of output rows computed
  // on the device, in (0, 1) (see split_rows in layer.h); ignored elsewhere.
  std::vector<double> device_rows;
  // Streamed layers the window holds at once (0 when nothing streams). The
  // window is a ring of variable-size regions (window_ring.h) of
  // window_bytes: each layer takes its own span, not the largest one.
  int slots = 0;
  // Streamed layers that may be loaded ahead of the one computing; 1..slots-1
  // (0 = serial: load, compute, repeat). The copy of streamed layer g waits
  // for the compute of streamed layer g - (prefetch_depth + 1) to finish.
  int prefetch_depth = 0;
  uint64_t slot_bytes = 0;        // largest streamed span (aligned)
  uint64_t window_bytes = 0;      // the window ring: `slots` consecutive streamed spans at most
  uint64_t vram_bytes = 0;        // residents + window (excluding the caller's reserve)
  uint64_t ram_bytes = 0;         // pinned RAM for RAM-tier layers (+ staging)
  double predicted_pass_s = 0;    // simulator, steady state
  double lower_bound_s = 0;       // max(sum compute, streamed load time)
  int batch_class = 0;            // cost-model class the plan was made for

  Site site(int layer) const { return sites.empty() ? Site::kDevice : sites[layer]; }
  double device_fraction(int layer) const {
    return site(layer) != Site::kSplit ? 1.0 : device_rows.empty() ? 0.5 : device_rows[layer];
  }
  // Streamed through the window: not resident and computed on the device
  // (whole, or its device half for kSplit).
  bool streamed(int layer) const { return tiers[layer] != Tier::kResident && site(layer) != Site::kHost; }
  int count_site(Site s) const;
  int count(Tier t) const;
  uint64_t bytes_in(Tier t, const std::vector<uint64_t>& layer_bytes) const;
  bool streams_anything() const;
  // Window distance W = prefetch_depth + 1 (copy g waits for compute g - W).
  int window() const { return prefetch_depth + 1; }
};

// "8 resident [0 3 5 ...], 10 ram, 2 disk; 3 slots in 3.00 MiB (largest 1.00 MiB), depth 2;
//  predicted 12.30 ms, bound 11.90 ms".
std::string describe_plan(const Plan& plan, const std::vector<uint64_t>& layer_bytes);

// Spans of the streamed layers of `tiers`, in streaming order.
std::vector<uint64_t> streamed_spans(const std::vector<uint64_t>& spans, const std::vector<Tier>& tiers);
// Spans of the layers of `plan` that stream (Plan::streamed), in order.
std::vector<uint64_t> streamed_spans(const std::vector<uint64_t>& spans, const Plan& plan);
// Per layer "R" resident, "S" streamed (RAM or disk), "H" host site, "X"
// split between device and host: "RRSSHHX".
std::string site_map(const Plan& plan);

// Bytes a slot must hold for this layer: its span rounded up, plus the
// alignment slack of an aligned disk read.
uint64_t slot_span(const LayerSpec& layer);

// Byte ranges (offset, length) within a kSplit layer's bytes that its device
// half needs at device fraction f: rows [0, split_rows(n, f)) of each split
// tensor and every byte outside the split tensors. In offset order.
std::vector<std::pair<uint64_t, uint64_t>> split_device_ranges(const LayerSpec& layer, double device_fraction);
uint64_t split_device_bytes(const LayerSpec& layer, double device_fraction);
// The same from bytes alone (planner/simulator, which see no LayerSpec):
// f x the split tensors' bytes plus the rest; exact up to row rounding.
uint64_t split_device_bytes_estimate(uint64_t bytes, uint64_t split_bytes, double device_fraction);

}  // namespace layerstream::sched

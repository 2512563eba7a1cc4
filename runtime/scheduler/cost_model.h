// CostModel: measured costs the planner and simulator work from.
// Per layer: compute seconds as an exponential moving average, kept
// separately per batch-size class (decode-sized and prefill-sized batches
// cost differently). Per link: bandwidth (bytes/s) measured from the copies
// themselves: pinned RAM -> device (H2D) and disk -> host.
// Units: seconds and bytes per second (decimal: 1 GB/s = 1e9 B/s).
// Thread safety: none; owned and updated by the executor's thread.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace layerstream::sched {

// Batch-size class: 0 for 1 token (decode), 1 for 2..16, 2 for 17..128,
// 3 for 129..1024, 4 above (prefill sizes).
int batch_class(int batch_tokens);

class CostModel {
 public:
  explicit CostModel(int num_layers = 0, double ema_alpha = 0.3);

  int num_layers() const { return static_cast<int>(hint_s_.size()); }
  // Compute estimate used before any measurement for `layer` in any class.
  void set_hint(int layer, double seconds);
  // Records one measured compute time (EMA; the first sample sets the value).
  void record_compute(int layer, int batch_class, double seconds);
  // Best estimate for `layer` in `batch_class`: its EMA, else the EMA of the
  // nearest measured class, else (measured on the host site only) its host
  // time / host_factor, else the hint (0 when none).
  double compute_s(int layer, int batch_class) const;
  std::vector<double> compute_all(int batch_class) const;
  bool measured(int layer, int batch_class) const;
  // True when every layer has a sample in this class.
  bool fully_measured(int batch_class) const;

  // Host site (hybrid execution): the layer's compute on the host lane, EMA
  // per class like compute_s. Before any host sample: `host_factor` x the
  // device estimate (set_host_factor; 0 = unknown, host_compute_s returns 0
  // and host_known() is false, so the planner never picks the host site).
  void record_host_compute(int layer, int batch_class, double seconds);
  void set_host_factor(double f) { host_factor_ = f; }
  double host_factor() const { return host_factor_; }
  bool host_known(int layer, int batch_class) const;
  bool host_measured(int layer, int batch_class) const { return host_ema_.at(layer).count(batch_class) > 0; }
  double host_compute_s(int layer, int batch_class) const;
  // Seconds to move the activations of one crossing (device<->host, one
  // direction) of a batch: set (a prior), or recorded by the executor from
  // the timed copies around each run of host-site layers (EMA per class
  // like compute; the first sample replaces a set value). 0 = free/unknown;
  // other classes use the nearest one's.
  void set_crossing_s(int batch_class, double seconds) { crossing_s_[batch_class] = seconds; }
  void record_crossing(int batch_class, double seconds);
  bool crossing_measured(int batch_class) const { return crossing_measured_.count(batch_class) > 0; }
  double crossing_s(int batch_class) const;
  // One pass of a split layer at device fraction f (0 < f < 1): the device
  // half's busy time (its rows of the split matmuls and the rest of the
  // layer) and the host half's (its rows on the host lane), each normalised
  // to the whole layer as one sample of each site: device compute
  // device_half / f, host compute host_half / (1 - f). So split_compute_s at
  // the same f gives back max(device_half, host_half). The normalisation
  // scales the layer's unsplit device work (norms, attention) with 1 / f
  // too: an over-estimate of the device site where that work is large.
  void record_split(int layer, int batch_class, double device_fraction, double device_half_s, double host_half_s);
  // Split layers (Site::kSplit): whether the device and the host lane
  // compute at the same time on separate hardware (a GPU) or share the same
  // cores (the host backend: its "device" is the CPU; set it before recording:
  // then whole-layer samples of either site are pooled, and compute_s and
  // host_compute_s both return the pool once a layer has one: one cost for
  // both sites; split halves stay per site), and the compute time
  // of a split layer at device fraction f: max(f x device, (1 - f) x host)
  // when concurrent, their sum when shared.
  void set_shared_compute(bool shared) { shared_compute_ = shared; }
  bool shared_compute() const { return shared_compute_; }
  double split_compute_s(int layer, int batch_class, double device_fraction) const;

  void set_link_bw(double bytes_per_s) { link_bw_ = bytes_per_s; }
  void set_disk_bw(double bytes_per_s) { disk_bw_ = bytes_per_s; }
  // One H2D copy / one disk read of `bytes` that took `seconds` (EMA of rate).
  void record_link(uint64_t bytes, double seconds);
  void record_disk(uint64_t bytes, double seconds);
  double link_bw() const { return link_bw_; }   // bytes/s; 0 = unknown
  double disk_bw() const { return disk_bw_; }   // bytes/s; 0 = unknown
  double link_s(uint64_t bytes) const { return link_bw_ > 0 ? bytes / link_bw_ : 0; }
  // Copy/compute contention (host backend, docs/ARCHITECTURE.md "The plan's
  // cost model"): there an H2D copy is a memcpy on the cores and memory
  // bandwidth the compute uses, so each byte a streamed layer's copy moves
  // takes `compute_s_per_byte` seconds from the compute lane as well, and
  // link_bw should be the copy rate measured beside compute. 0 (default):
  // independent lanes, as on a GPU. The executor leaves it 0: the compute
  // times it measures already include the slowdown.
  void set_copy_contention(double compute_s_per_byte) { copy_contention_ = compute_s_per_byte; }
  double copy_contention() const { return copy_contention_; }
  double copy_contention_s(uint64_t bytes) const { return bytes * copy_contention_; }
  double disk_s(uint64_t bytes) const { return disk_bw_ > 0 ? bytes / disk_bw_ : 0; }

 private:
  void fold_ema(std::map<int, double>& per_class, int cls, double s) const;
  double alpha_;
  std::vector<double> hint_s_;
  std::vector<std::map<int, double>> ema_;  // per layer: class -> seconds
  std::vector<std::map<int, double>> host_ema_;  // per layer: class -> seconds
  std::vector<std::map<int, double>> pooled_ema_;  // shared cores: either site's whole-layer samples
  double host_factor_ = 0;
  std::map<int, double> crossing_s_;
  std::map<int, bool> crossing_measured_;
  bool shared_compute_ = false;
  double link_bw_ = 0;
  double disk_bw_ = 0;
  double copy_contention_ = 0;  // seconds of compute per copied byte
};

}  // namespace layerstream::sched

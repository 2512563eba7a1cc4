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
  // Seconds to move the activations of one crossing (device<->host) of a
  // batch; set by the executor's owner (0 = free).
  void set_crossing_s(int batch_class, double seconds) { crossing_s_[batch_class] = seconds; }
  double crossing_s(int batch_class) const;
  // Split layers (Site::kSplit): whether the device and the host lane
  // compute at the same time on separate hardware (a GPU) or share the same
  // cores (the host backend: its "device" is the CPU), and the compute time
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
  double disk_s(uint64_t bytes) const { return disk_bw_ > 0 ? bytes / disk_bw_ : 0; }

 private:
  double alpha_;
  std::vector<double> hint_s_;
  std::vector<std::map<int, double>> ema_;  // per layer: class -> seconds
  std::vector<std::map<int, double>> host_ema_;  // per layer: class -> seconds
  double host_factor_ = 0;
  std::map<int, double> crossing_s_;
  bool shared_compute_ = false;
  double link_bw_ = 0;
  double disk_bw_ = 0;
};

}  // namespace layerstream::sched

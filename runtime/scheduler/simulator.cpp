#include "runtime/scheduler/simulator.h"

#include <algorithm>

#include "layerstream/status.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/window_ring.h"

namespace layerstream::sched {

double SimResult::total_stall_s() const {
  double s = 0;
  for (double x : stall_s) s += x;
  return s;
}

SimResult simulate(const std::vector<SimLayer>& layers, const SimOptions& o) {
  SimResult r;
  const int n = static_cast<int>(layers.size());
  r.stall_s.assign(n, 0.0);
  std::vector<int> streamed;  // layer indices of streamed layers, in order
  for (int i = 0; i < n; ++i) {
    const SimLayer& l = layers[i];
    r.sum_compute_s += l.compute_s;
    if (l.tier != Tier::kResident && l.site != Site::kHost) {
      streamed.push_back(i);
      r.sum_link_s += l.link_s;
      r.sum_disk_s += l.disk_s;
    }
  }
  r.lower_bound_s = std::max({r.sum_compute_s, r.sum_link_s, r.sum_disk_s});
  const int m = static_cast<int>(streamed.size());
  const int passes = std::max(2, o.passes);
  const int W = std::max(1, std::min(o.prefetch_depth + 1, std::max(1, o.slots)));
  LS_CHECK(m == 0 || o.slots >= 1);

  std::vector<double> done(static_cast<size_t>(m) * passes, 0.0);
  std::vector<double> loaded(done.size(), 0.0), copy_start(done.size(), 0.0);
  double copy_end = 0, disk_end = 0;
  int next_copy = 0;  // next global streamed index to simulate the load of
  WindowRing ring(o.window_bytes > 0 ? o.window_bytes : 1, static_cast<uint64_t>(W));
  auto load = [&](int g) {
    const SimLayer& l = layers[streamed[g % m]];
    double slot_free = g - W >= 0 ? done[g - W] : 0.0;
    if (o.window_bytes > 0) {
      const WindowRing::Placement pl = ring.place(static_cast<uint64_t>(g), std::max<uint64_t>(1, l.span));
      if (pl.overlaps >= 0) slot_free = std::max(slot_free, done[pl.overlaps]);
    }
    double start = std::max(copy_end, slot_free);
    if (l.tier == Tier::kDisk) {
      const int ahead = g - std::max(1, W - 1);
      const double gate = o.disk_direct ? slot_free : (ahead >= 0 ? copy_start[ahead] : 0.0);
      double dstart = std::max(disk_end, gate);
      disk_end = dstart + l.disk_s;
      if (o.disk_direct) {
        start = std::max(start, disk_end);  // the compute waits for the read itself
        copy_end = start;
      } else {
        copy_end = std::max(start + l.link_s, disk_end + std::min(o.chunk_link_s, l.link_s));
      }
    } else {
      copy_end = start + l.link_s;
    }
    copy_start[g] = start;
    loaded[g] = copy_end;
  };

  double t = 0, prev_pass_end = 0, last_pass_s = 0;
  for (int p = 0; p < passes; ++p) {
    int k = 0;
    for (int i = 0; i < n; ++i) {
      const SimLayer& l = layers[i];
      double start = t;
      if (l.tier != Tier::kResident && l.site != Site::kHost) {
        int g = p * m + k++;
        while (next_copy <= g) load(next_copy++);
        start = std::max(t, loaded[g]);
        done[g] = start + l.compute_s;
      }
      if (p == passes - 1) r.stall_s[i] = start - t;
      t = start + l.compute_s;
    }
    last_pass_s = t - prev_pass_end;
    prev_pass_end = t;
  }
  r.pass_s = last_pass_s;
  return r;
}

std::vector<SimLayer> make_sim_layers(const std::vector<uint64_t>& bytes,
                                      const std::vector<uint64_t>& spans,
                                      const std::vector<Tier>& tiers, const CostModel& cost,
                                      int cls, bool disk_direct, const std::vector<Site>& sites,
                                      const std::vector<double>& device_rows, const std::vector<uint64_t>& split_bytes) {
  std::vector<SimLayer> v(bytes.size());
  const int n = static_cast<int>(bytes.size());
  auto site = [&](int i) { return i < 0 || i >= n || sites.empty() ? Site::kDevice : sites[i]; };
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int l = static_cast<int>(i);
    v[i].compute_s = cost.compute_s(l, cls);
    v[i].span = spans[i];
    v[i].tier = tiers[i];
    v[i].site = site(l);
    if (v[i].site == Site::kHost) {
      // Host compute from host memory (a disk-tier host layer reads first),
      // plus the crossings into and out of the host lane.
      v[i].compute_s = cost.host_compute_s(l, cls) + (tiers[i] == Tier::kDisk ? cost.disk_s(spans[i]) : 0) +
                       (site(l - 1) != Site::kHost ? cost.crossing_s(cls) : 0) +
                       (site(l + 1) != Site::kHost ? cost.crossing_s(cls) : 0);
      continue;
    }
    if (v[i].site == Site::kSplit) {
      // Both halves, and per matmul group (QKV, O, gate/up, down) the
      // activations to the host and the joined outputs back.
      const double f = device_rows.empty() ? 0.5 : device_rows[i];
      v[i].compute_s = cost.split_compute_s(l, cls, f) + 8 * cost.crossing_s(cls);
      v[i].link_s = cost.link_s(split_device_bytes_estimate(bytes[i], split_bytes.empty() ? 0 : split_bytes[i], f));
      continue;
    }
    if (tiers[i] == Tier::kRam) v[i].link_s = cost.link_s(bytes[i]);
    if (tiers[i] == Tier::kDisk) {
      v[i].disk_s = cost.disk_s(spans[i]);
      v[i].link_s = disk_direct ? 0 : cost.link_s(bytes[i]);
    }
    // Contention: a copied byte also takes compute time (host backend). The
    // copy of layer i overlaps earlier layers' compute; charging it to layer
    // i keeps each pass's total, which is what a compute-bound pass costs.
    if (v[i].link_s > 0) v[i].compute_s += cost.copy_contention_s(bytes[i]);
  }
  return v;
}

}  // namespace layerstream::sched

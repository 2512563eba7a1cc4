#include "runtime/scheduler/cost_model.h"

#include <algorithm>

#include <cstdlib>

#include "layerstream/status.h"
#include "runtime/core/status_macros.h"

namespace layerstream::sched {

int batch_class(int t) {
  if (t <= 1) return 0;
  if (t <= 16) return 1;
  if (t <= 128) return 2;
  if (t <= 1024) return 3;
  return 4;
}

CostModel::CostModel(int n, double alpha) : alpha_(alpha), hint_s_(n, 0.0), ema_(n), host_ema_(n), pooled_ema_(n) {
  LS_CHECK(alpha > 0 && alpha <= 1);
}

void CostModel::set_hint(int layer, double s) { hint_s_.at(layer) = s; }

namespace {
double nearest_class(const std::map<int, double>& m, int cls) {
  auto it = m.find(cls);
  if (it != m.end()) return it->second;
  int best = -1;
  double v = 0;
  for (const auto& [c, s] : m)
    if (best < 0 || std::abs(c - cls) < std::abs(best - cls)) best = c, v = s;
  return v;
}
}  // namespace

// Shared cores (the host backend): both sites run the same kernels on the
// same cores, so a whole-layer sample of either site is a sample of the
// layer's one compute cost (pooled_ema_, which compute_s and host_compute_s
// then both return), and the sites differ only by the link and the crossings.
// Kept apart, each site's samples carry whatever else ran beside them (a
// streamed layer's copy beside a host-site layer, a noisy neighbour), and
// that noise alone would move layers between sites.
void CostModel::record_host_compute(int layer, int cls, double s) {
  fold_ema(host_ema_.at(layer), cls, s);
  if (shared_compute_) fold_ema(pooled_ema_.at(layer), cls, s);
}

bool CostModel::host_known(int layer, int cls) const {
  return !host_ema_.at(layer).empty() || host_factor_ > 0;
}

double CostModel::host_compute_s(int layer, int cls) const {
  if (shared_compute_ && !pooled_ema_.at(layer).empty()) return nearest_class(pooled_ema_[layer], cls);
  const auto& m = host_ema_.at(layer);
  if (m.count(cls)) return m.at(cls);
  // Another class's host sample scaled by this class's device estimate
  // relative to that class's, else the factor.
  if (!m.empty()) {
    int best = -1;
    for (const auto& [c, s] : m)
      if (best < 0 || std::abs(c - cls) < std::abs(best - cls)) best = c;
    const double dev_here = compute_s(layer, cls), dev_there = compute_s(layer, best);
    const double host_there = nearest_class(m, cls);
    return dev_there > 0 && dev_here > 0 ? host_there * dev_here / dev_there : host_there;
  }
  return host_factor_ * compute_s(layer, cls);
}

double CostModel::crossing_s(int cls) const {
  return crossing_s_.empty() ? 0.0 : nearest_class(crossing_s_, cls);
}

void CostModel::record_crossing(int cls, double s) {
  if (s < 0) return;
  auto it = crossing_s_.find(cls);
  if (it == crossing_s_.end() || !crossing_measured(cls)) crossing_s_[cls] = s;
  else it->second = alpha_ * s + (1 - alpha_) * it->second;
  crossing_measured_[cls] = true;
}

void CostModel::record_split(int layer, int cls, double f, double device_half_s, double host_half_s) {
  if (!(f > 0 && f < 1)) return;
  // Each half normalised is a sample of its site only (never pooled).
  if (device_half_s > 0) fold_ema(ema_.at(layer), cls, device_half_s / f);
  if (host_half_s > 0) fold_ema(host_ema_.at(layer), cls, host_half_s / (1 - f));
}

double CostModel::split_compute_s(int layer, int cls, double f) const {
  const double d = f * compute_s(layer, cls), h = (1 - f) * host_compute_s(layer, cls);
  return shared_compute_ ? d + h : std::max(d, h);
}

void CostModel::record_compute(int layer, int cls, double s) {
  fold_ema(ema_.at(layer), cls, s);
  if (shared_compute_) fold_ema(pooled_ema_.at(layer), cls, s);
}

// The first sample of a class is taken as is; later ones are folded in with
// weight alpha (one rule for device and host compute times).
void CostModel::fold_ema(std::map<int, double>& per_class, int cls, double s) const {
  auto it = per_class.find(cls);
  if (it == per_class.end()) per_class.emplace(cls, s);
  else it->second = alpha_ * s + (1 - alpha_) * it->second;
}

double CostModel::compute_s(int layer, int cls) const {
  if (shared_compute_ && !pooled_ema_.at(layer).empty()) return nearest_class(pooled_ema_[layer], cls);
  const auto& m = ema_.at(layer);
  if (m.empty() && !host_ema_.at(layer).empty() && host_factor_ > 0)
    return nearest_class(host_ema_[layer], cls) / host_factor_;
  if (m.empty()) return hint_s_[layer];
  auto it = m.find(cls);
  if (it != m.end()) return it->second;
  int best = -1;
  double v = 0;
  for (const auto& [c, s] : m) {
    if (best < 0 || std::abs(c - cls) < std::abs(best - cls)) best = c, v = s;
  }
  return v;
}

std::vector<double> CostModel::compute_all(int cls) const {
  std::vector<double> v(hint_s_.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = compute_s(static_cast<int>(i), cls);
  return v;
}

bool CostModel::measured(int layer, int cls) const { return ema_.at(layer).count(cls) > 0; }

bool CostModel::fully_measured(int cls) const {
  for (size_t i = 0; i < ema_.size(); ++i)
    if (!measured(static_cast<int>(i), cls)) return false;
  return true;
}

static void ema_rate(double& bw, double alpha, uint64_t bytes, double s) {
  if (s <= 0 || bytes == 0) return;
  double r = bytes / s;
  bw = bw > 0 ? alpha * r + (1 - alpha) * bw : r;
}

void CostModel::record_link(uint64_t bytes, double s) { ema_rate(link_bw_, alpha_, bytes, s); }
void CostModel::record_disk(uint64_t bytes, double s) { ema_rate(disk_bw_, alpha_, bytes, s); }

}  // namespace layerstream::sched

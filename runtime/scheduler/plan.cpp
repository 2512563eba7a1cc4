#include "runtime/scheduler/plan.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "layerstream/units.h"

namespace layerstream::sched {

std::string_view tier_name(Tier tier) {
  switch (tier) {
    case Tier::kResident: return "resident";
    case Tier::kRam: return "ram";
    case Tier::kDisk: return "disk";
  }
  return "?";
}

std::string_view site_name(Site s) {
  switch (s) {
    case Site::kDevice: return "device";
    case Site::kHost: return "host";
    case Site::kSplit: return "split";
  }
  return "?";
}

int64_t split_rows(int64_t rows, double f) {
  if (f >= 1.0) return rows;
  if (f <= 0.0) return 0;
  const int64_t r = std::llround(f * static_cast<double>(rows) / kSplitRowAlign) * kSplitRowAlign;
  return std::clamp<int64_t>(r, 0, rows);
}

std::vector<std::pair<uint64_t, uint64_t>> split_device_ranges(const LayerSpec& l, double f) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  uint64_t at = 0;
  auto add = [&](uint64_t off, uint64_t len) {
    if (len == 0) return;
    if (!out.empty() && out.back().first + out.back().second == off) out.back().second += len;
    else out.emplace_back(off, len);
  };
  for (const SplitTensor& t : l.split_tensors) {
    add(at, t.offset - at);
    const uint64_t row_bytes = t.rows > 0 ? t.bytes / static_cast<uint64_t>(t.rows) : 0;
    add(t.offset, static_cast<uint64_t>(split_rows(t.rows, f)) * row_bytes);
    at = t.offset + t.bytes;
  }
  add(at, l.bytes - std::min(at, l.bytes));
  return out;
}

uint64_t split_device_bytes(const LayerSpec& l, double f) {
  uint64_t b = 0;
  for (const auto& r : split_device_ranges(l, f)) b += r.second;
  return b;
}

uint64_t split_device_bytes_estimate(uint64_t bytes, uint64_t split_bytes, double f) {
  split_bytes = std::min(split_bytes, bytes);
  return bytes - split_bytes + static_cast<uint64_t>(std::llround(f * static_cast<double>(split_bytes)));
}

int Plan::count_site(Site s) const {
  int n = 0;
  for (size_t i = 0; i < tiers.size(); ++i) n += site(static_cast<int>(i)) == s;
  return n;
}

bool Plan::streams_anything() const {
  for (size_t i = 0; i < tiers.size(); ++i)
    if (streamed(static_cast<int>(i))) return true;
  return false;
}

std::string site_map(const Plan& plan) {
  std::string s;
  for (size_t i = 0; i < plan.tiers.size(); ++i) {
    const int l = static_cast<int>(i);
    s += plan.site(l) == Site::kHost    ? 'H'
         : plan.site(l) == Site::kSplit ? 'X'
         : plan.tiers[i] == Tier::kResident ? 'R'
                                            : 'S';
  }
  return s;
}

std::vector<uint64_t> streamed_spans(const std::vector<uint64_t>& spans, const Plan& plan) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < plan.tiers.size(); ++i)
    if (plan.streamed(static_cast<int>(i))) out.push_back(spans[i]);
  return out;
}

int Plan::count(Tier t) const {
  int n = 0;
  for (Tier x : tiers) n += x == t;
  return n;
}

uint64_t Plan::bytes_in(Tier t, const std::vector<uint64_t>& layer_bytes) const {
  uint64_t b = 0;
  for (size_t i = 0; i < tiers.size(); ++i)
    if (tiers[i] == t) b += layer_bytes[i];
  return b;
}

std::string describe_plan(const Plan& plan, const std::vector<uint64_t>& layer_bytes) {
  std::string res;
  for (size_t i = 0; i < plan.tiers.size(); ++i)
    if (plan.tiers[i] == Tier::kResident) res += (res.empty() ? "" : " ") + std::to_string(i);
  return fmt::format(
      "{} resident [{}] ({}), {} ram ({}), {} disk ({}); {} slots in {} (largest {}), prefetch depth {}; "
      "predicted pass {:.3f} ms, lower bound {:.3f} ms{}",
      plan.count(Tier::kResident), res, format_bytes(plan.bytes_in(Tier::kResident, layer_bytes)),
      plan.count(Tier::kRam), format_bytes(plan.bytes_in(Tier::kRam, layer_bytes)),
      plan.count(Tier::kDisk), format_bytes(plan.bytes_in(Tier::kDisk, layer_bytes)), plan.slots,
      format_bytes(plan.window_bytes), format_bytes(plan.slot_bytes), plan.prefetch_depth, plan.predicted_pass_s * 1e3,
      plan.lower_bound_s * 1e3,
      plan.count_site(Site::kHost) + plan.count_site(Site::kSplit)
          ? fmt::format("; {} on the host site, {} split, sites {}", plan.count_site(Site::kHost),
                        plan.count_site(Site::kSplit), site_map(plan))
          : std::string());
}

std::vector<uint64_t> streamed_spans(const std::vector<uint64_t>& spans, const std::vector<Tier>& tiers) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < tiers.size(); ++i)
    if (tiers[i] != Tier::kResident) out.push_back(spans[i]);
  return out;
}

uint64_t slot_span(const LayerSpec& layer) {
  uint64_t span = round_up(layer.bytes, kSlotAlignment);
  if (layer.from_file()) {
    uint64_t begin = layer.file_offset / kSlotAlignment * kSlotAlignment;
    span = round_up(layer.file_offset + layer.bytes, kSlotAlignment) - begin;
  }
  return span;
}

}  // namespace layerstream::sched

#include "runtime/scheduler/plan.h"

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

std::string_view site_name(Site s) { return s == Site::kHost ? "host" : "device"; }

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
    s += plan.site(l) == Site::kHost ? 'H' : plan.tiers[i] == Tier::kResident ? 'R' : 'S';
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
      plan.count_site(Site::kHost) ? fmt::format("; {} on the host site, sites {}", plan.count_site(Site::kHost), site_map(plan))
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

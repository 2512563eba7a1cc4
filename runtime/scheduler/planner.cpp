#include "runtime/scheduler/planner.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "layerstream/units.h"
#include "runtime/core/status_macros.h"
#include "runtime/scheduler/window_ring.h"

namespace layerstream::sched {
namespace {

int n_layers(const PlannerInput& in) { return static_cast<int>(in.bytes.size()); }

uint64_t max_streamed_span(const PlannerInput& in, const Plan& p) {
  uint64_t m = 0;
  for (size_t i = 0; i < p.tiers.size(); ++i)
    if (p.streamed(static_cast<int>(i))) m = std::max(m, in.spans[i]);
  return m;
}

bool host_candidate(const PlannerInput& in, int i) {
  return i < static_cast<int>(in.host_ok.size()) && in.host_ok[i] && in.cost->host_known(i, in.batch_class);
}

bool split_candidate(const PlannerInput& in, int i) {
  return host_candidate(in, i) && i < static_cast<int>(in.split_bytes.size()) && in.split_bytes[i] > 0 &&
         in.cost->compute_s(i, in.batch_class) > 0;
}

uint64_t resident_bytes(const PlannerInput& in, const std::vector<Tier>& t) {
  uint64_t b = 0;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] == Tier::kResident) b += round_up(in.bytes[i], kSlotAlignment);
  return b;
}

// Decides RAM vs disk for streamed layers that are not pinned. Layers with no
// file must go to RAM first. Returns false when a memory-only layer cannot
// get RAM. Sets ram_bytes.
bool assign_ram(const PlannerInput& in, std::vector<Tier>& t, uint64_t& ram_bytes) {
  const int n = n_layers(in);
  uint64_t pinned_ram = 0, want = 0;
  for (int i = 0; i < n; ++i) {
    if (in.pins[i] == Tier::kRam) pinned_ram += in.bytes[i];
    if (!in.pins[i] && t[i] != Tier::kResident) want += in.bytes[i];
  }
  // Everything streamed fits in RAM: no disk tier (unless pinned).
  if (pinned_ram + want <= in.ram_budget) {
    for (int i = 0; i < n; ++i)
      if (!in.pins[i] && t[i] != Tier::kResident) t[i] = Tier::kRam;
    ram_bytes = pinned_ram + want;
    return true;
  }
  if (pinned_ram > in.ram_budget) return false;
  uint64_t left = in.ram_budget - pinned_ram;
  ram_bytes = pinned_ram;
  for (int pass = 0; pass < 2; ++pass) {  // memory-only layers first
    for (int i = 0; i < n; ++i) {
      if (in.pins[i] || t[i] == Tier::kResident) continue;
      if ((pass == 0) == in.from_file[i]) continue;
      if (in.bytes[i] <= left) {
        t[i] = Tier::kRam;
        left -= in.bytes[i];
        ram_bytes += in.bytes[i];
      } else if (in.from_file[i]) {
        t[i] = Tier::kDisk;
      } else {
        return false;
      }
    }
  }
  return true;
}

struct Trial {
  bool ok = false;
  Plan plan;
};

// `all_host`: every non-resident host candidate on the host site; `sites`
// (when given): these sites (a host site on a resident layer fails).
Trial try_tiers(const PlannerInput& in, std::vector<Tier> t, int slots, int depth, bool all_host = false,
                const std::vector<Site>* sites = nullptr) {
  Trial r;
  uint64_t ram = 0;
  if (!assign_ram(in, t, ram)) return r;
  Plan p;
  p.tiers = std::move(t);
  if (sites || all_host) {
    std::vector<Site> s = sites ? *sites : std::vector<Site>(p.tiers.size(), Site::kDevice);
    bool any = false;
    for (size_t i = 0; i < s.size(); ++i) {
      const int l = static_cast<int>(i);
      if (all_host && p.tiers[i] != Tier::kResident && host_candidate(in, l)) s[i] = Site::kHost;
      if (s[i] != Site::kDevice && p.tiers[i] == Tier::kResident) return r;
      if (s[i] == Site::kSplit && p.tiers[i] != Tier::kRam) return r;  // splits stream from the RAM tier
      any = any || s[i] != Site::kDevice;
    }
    if (any) p.sites = std::move(s);
  }
  if (p.count_site(Site::kSplit) > 0) {
    p.device_rows.assign(p.tiers.size(), 1.0);
    for (size_t i = 0; i < p.tiers.size(); ++i)
      if (p.sites[i] == Site::kSplit) p.device_rows[i] = balanced_split(in, static_cast<int>(i));
  }
  bool streams = p.streams_anything();
  p.slots = streams ? slots : 0;
  p.prefetch_depth = streams ? std::clamp(depth, 0, std::max(0, slots - 1)) : 0;
  p.slot_bytes = streams ? max_streamed_span(in, p) : 0;
  p.window_bytes = streams ? window_bytes_for(streamed_spans(in.spans, p), p.slots) : 0;
  p.vram_bytes = resident_bytes(in, p.tiers) + p.window_bytes;
  if (p.vram_bytes > in.vram_budget) return r;
  if (streams && slots < 1) return r;
  p.ram_bytes = ram;
  evaluate_plan(in, p);
  r.ok = true;
  r.plan = std::move(p);
  return r;
}

int distance_to_resident(const std::vector<Tier>& t, int i) {
  int n = static_cast<int>(t.size()), best = n;
  for (int j = 0; j < n; ++j)
    if (t[j] == Tier::kResident) {
      int d = std::abs(i - j);
      best = std::min(best, std::min(d, n - d));  // cyclic: the pass wraps around
    }
  return best;
}

Status check_input(const PlannerInput& in) {
  const int n = n_layers(in);
  if (in.cost == nullptr || in.cost->num_layers() != n || static_cast<int>(in.spans.size()) != n ||
      static_cast<int>(in.pins.size()) != n || static_cast<int>(in.from_file.size()) != n)
    return Status::InvalidArgument("planner input: per-layer vectors and cost model disagree on the layer count");
  for (int i = 0; i < n; ++i) {
    if (in.pins[i] == Tier::kDisk && !in.from_file[i])
      return Status::InvalidArgument(fmt::format(
          "layer {} is pinned to the disk tier but has no file to read it from", i));
  }
  return Status::OK();
}

Status no_fit_error(const PlannerInput& in, int slots) {
  std::vector<Tier> t(in.bytes.size(), Tier::kRam);
  for (size_t i = 0; i < t.size(); ++i)
    if (in.pins[i]) t[i] = *in.pins[i];
  uint64_t need = resident_bytes(in, t) + window_bytes_for(streamed_spans(in.spans, t), std::max(1, slots));
  uint64_t ram_pinned = 0, mem_only = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (in.pins[i] == Tier::kRam) ram_pinned += in.bytes[i];
    if (!in.from_file[i] && in.pins[i] != Tier::kResident) mem_only += in.bytes[i];
  }
  if (need > in.vram_budget)
    return Status::OutOfBudget(fmt::format(
        "VRAM budget too small for the pinned residents plus a window of {} slot(s): need {} "
        "({} B), available {} ({} B)",
        std::max(1, slots), format_bytes(need), need, format_bytes(in.vram_budget), in.vram_budget));
  return Status::OutOfBudget(fmt::format(
      "RAM budget too small: layers without a file and RAM-pinned layers need {} ({} B) of pinned "
      "RAM, available {} ({} B)",
      format_bytes(std::max(ram_pinned, mem_only)), std::max(ram_pinned, mem_only),
      format_bytes(in.ram_budget), in.ram_budget));
}

}  // namespace

SimResult evaluate_plan(const PlannerInput& in, Plan& p) {
  std::vector<SimLayer> sl =
      make_sim_layers(in.bytes, in.spans, p.tiers, *in.cost, in.batch_class, in.disk_direct, p.sites, p.device_rows,
                      in.split_bytes);
  SimOptions o;
  o.slots = p.slots;
  o.prefetch_depth = p.prefetch_depth;
  o.disk_direct = in.disk_direct;
  o.chunk_link_s = in.cost->link_s(in.chunk_bytes);
  o.window_bytes = p.window_bytes;
  SimResult r = simulate(sl, o);
  p.predicted_pass_s = r.pass_s;
  p.lower_bound_s = r.lower_bound_s;
  p.batch_class = in.batch_class;
  return r;
}

namespace {

// Greedy single-layer site changes from `start` while one improves the
// predicted pass time (host candidates only, to any other site: device,
// host, split where the layer can; tiers re-assigned as usual).
Plan refine_sites(const PlannerInput& in, Plan cur) {
  const int n = n_layers(in);
  for (;;) {
    std::optional<Trial> pick;
    for (int i = 0; i < n; ++i) {
      if (cur.tiers[i] == Tier::kResident || !host_candidate(in, i)) continue;
      for (Site to : {Site::kDevice, Site::kHost, Site::kSplit}) {
        if (to == cur.site(i) || (to == Site::kSplit && (!split_candidate(in, i) || balanced_split(in, i) <= 0)))
          continue;
        std::vector<Site> s = cur.sites.empty() ? std::vector<Site>(n, Site::kDevice) : cur.sites;
        s[i] = to;
        const int slots = cur.slots > 0 ? cur.slots : std::max(1, in.fixed_slots > 0 ? in.fixed_slots : 2);
        const int depth = in.fixed_depth >= 0 ? in.fixed_depth : slots - 1;
        Trial tr = try_tiers(in, cur.tiers, slots, depth, false, &s);
        if (!tr.ok || tr.plan.predicted_pass_s >= cur.predicted_pass_s * (1 - 1e-6)) continue;
        if (!pick || tr.plan.predicted_pass_s < pick->plan.predicted_pass_s) pick = std::move(tr);
      }
    }
    if (!pick) return cur;
    cur = std::move(pick->plan);
  }
}

Result<Plan> make_plan_sites(const PlannerInput& in, bool all_host);

}  // namespace

Result<Plan> make_plan(const PlannerInput& in) {
  LS_RETURN_IF_ERROR(check_input(in));
  if (in.host_policy == HostPolicy::kNever || in.serial) return make_plan_sites(in, false);
  if (in.host_policy == HostPolicy::kAll) return make_plan_sites(in, true);
  // No device-only plan fits (the budget holds no window): the host site's
  // plans may still (they need VRAM only for the layers that stay on the
  // device). The host site is then the only placement, so a layer whose host
  // cost is not known yet goes there at its device estimate until measured
  // (what min_vram_budget assumes).
  Result<Plan> dev = make_plan_sites(in, false);
  if (!dev.ok()) {
    CostModel cost = *in.cost;
    if (cost.host_factor() <= 0) cost.set_host_factor(1.0);
    PlannerInput host_in = in;
    host_in.cost = &cost;
    Result<Plan> host = make_plan_sites(host_in, true);
    if (!host.ok()) return dev.status();
    return refine_sites(host_in, std::move(*host));
  }
  Plan best = refine_sites(in, std::move(*dev));
  if (auto host = make_plan_sites(in, true); host.ok()) {
    Plan h = refine_sites(in, std::move(*host));
    // On a tie (e.g. before anything is measured) the plan with more resident
    // bytes wins: residents cost nothing per pass on any site.
    const bool tie = h.predicted_pass_s <= best.predicted_pass_s * (1 + 1e-6);
    if (h.predicted_pass_s < best.predicted_pass_s * (1 - 1e-6) ||
        (tie && resident_bytes(in, h.tiers) > resident_bytes(in, best.tiers)))
      best = std::move(h);
  }
  return best;
}

namespace {
// The tiers the residency search starts from. Slot-size caps: residency only
// shrinks the window once every layer of the largest span is resident, which
// single greedy steps cannot see. So the search also starts from "every
// layer larger than the cap is resident" for the few largest distinct spans.
std::vector<std::vector<Tier>> search_starts(const PlannerInput& in, const std::vector<Tier>& base, bool all_host) {
  const int n = n_layers(in);
  std::vector<uint64_t> caps = {std::numeric_limits<uint64_t>::max()};  // no cap
  for (int i = 0; i < n; ++i)
    if (!in.pins[i]) caps.push_back(in.spans[i]);
  std::sort(caps.rbegin(), caps.rend());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  if (caps.size() > 5) caps.resize(5);
  std::vector<std::vector<Tier>> starts;
  for (uint64_t cap : caps) {
    std::vector<Tier> start = base;
    for (int i = 0; i < n; ++i)
      if (!in.pins[i] && in.spans[i] > cap) start[i] = Tier::kResident;
    starts.push_back(std::move(start));
  }
  if (all_host) {
    // Every layer that cannot go to the host resident: the least VRAM a
    // host plan needs (no window when nothing else streams), which the
    // greedy steps from "stream it" cannot reach when no window fits.
    std::vector<Tier> start = base;
    for (int i = 0; i < n; ++i)
      if (!in.pins[i] && !host_candidate(in, i)) start[i] = Tier::kResident;
    starts.push_back(std::move(start));
  }
  return starts;
}

// From `cur`, makes resident one layer at a time the one whose residency
// cuts the predicted pass most per byte (ties: the farthest from other
// residents) while one does.
Trial greedy_residents(const PlannerInput& in, Trial cur, int slots, int depth, bool all_host) {
  const int n = n_layers(in);
  for (;;) {
    int pick = -1;
    double pick_score = 0, pick_spread = 0;
    Trial pick_trial;
    const double cur_s = cur.plan.predicted_pass_s;
    for (int i = 0; i < n; ++i) {
      if (in.pins[i] || cur.plan.tiers[i] == Tier::kResident) continue;
      std::vector<Tier> t = cur.plan.tiers;
      for (int j = 0; j < n; ++j)
        if (!in.pins[j] && t[j] != Tier::kResident) t[j] = Tier::kRam;  // re-assign RAM/disk
      t[i] = Tier::kResident;
      Trial tr = try_tiers(in, t, slots, depth, all_host);
      if (!tr.ok) continue;
      double gain = cur_s - tr.plan.predicted_pass_s;
      if (gain < -1e-12 * std::max(1e-9, cur_s)) continue;
      double score = gain / static_cast<double>(in.bytes[i]);
      double spread = distance_to_resident(cur.plan.tiers, i);
      bool better = pick < 0 || score > pick_score * (1 + 1e-9) + 1e-18 ||
                    (std::abs(score - pick_score) <= 1e-9 * std::abs(pick_score) + 1e-18 &&
                     spread > pick_spread);
      if (better) pick = i, pick_score = score, pick_spread = spread, pick_trial = std::move(tr);
    }
    if (pick < 0) break;
    cur = std::move(pick_trial);
  }
  return cur;
}

Result<Plan> make_plan_sites(const PlannerInput& in, bool all_host) {
  const int n = n_layers(in);
  std::vector<int> slot_choices;
  if (in.serial) slot_choices = {1};
  else if (in.fixed_slots > 0) slot_choices = {in.fixed_slots};
  else
    for (int s = 2; s <= std::max(2, in.max_slots); ++s) slot_choices.push_back(s);

  std::vector<Tier> base(n, Tier::kRam);
  for (int i = 0; i < n; ++i)
    if (in.pins[i]) base[i] = *in.pins[i];

  std::optional<Plan> best;
  // Everything resident when it all fits and nothing is pinned to stream.
  {
    std::vector<Tier> all(n, Tier::kResident);
    bool allowed = true;
    for (int i = 0; i < n; ++i)
      if (in.pins[i] && *in.pins[i] != Tier::kResident) allowed = false;
    if (allowed && !in.serial) {
      Trial t = try_tiers(in, all, 0, 0, all_host);
      if (t.ok) return t.plan;
    }
  }
  const std::vector<std::vector<Tier>> starts = search_starts(in, base, all_host);
  bool streamed_any = false;  // all-host: once no plan streams, other slot counts repeat the same search
  for (int slots : slot_choices) for (const std::vector<Tier>& start : starts) {
    if (all_host && slots != slot_choices.front() && !streamed_any) break;
    int depth = in.serial ? 0 : (in.fixed_depth >= 0 ? in.fixed_depth : slots - 1);
    Trial cur = try_tiers(in, start, slots, depth, all_host);
    if (!cur.ok) continue;
    cur = greedy_residents(in, std::move(cur), slots, depth, all_host);
    streamed_any = streamed_any || cur.plan.streams_anything();
    if (!best || cur.plan.predicted_pass_s < best->predicted_pass_s * (1 - 1e-6)) best = cur.plan;
  }
  if (!best) return no_fit_error(in, slot_choices.front());
  return *best;
}
}  // namespace

double balanced_split(const PlannerInput& in, int i) {
  if (!split_candidate(in, i)) return 0;
  const CostModel& c = *in.cost;
  const int cls = in.batch_class;
  const double host = c.host_compute_s(i, cls);
  // Halves that share the cores (the host backend) never finish sooner than
  // the host site alone: no split.
  if (host <= 0 || c.shared_compute()) return 0;
  // Device half minus host half grows with f: bisect for where they meet.
  auto gap = [&](double f) {
    const double link = c.link_s(split_device_bytes_estimate(in.bytes[i], in.split_bytes[i], f));
    return std::max(link, f * c.compute_s(i, cls)) - (1 - f) * host;
  };
  double lo = 0, hi = 1;
  for (int it = 0; it < 30; ++it) {
    const double mid = 0.5 * (lo + hi);
    (gap(mid) < 0 ? lo : hi) = mid;
  }
  const double f = 0.5 * (lo + hi);
  return f > 0.01 && f < 0.99 ? f : 0;
}

Result<Plan> plan_first_fit(const PlannerInput& in, int slots) {
  LS_RETURN_IF_ERROR(check_input(in));
  const int n = n_layers(in);
  std::vector<Tier> t(n, Tier::kRam);
  for (int i = 0; i < n; ++i)
    if (in.pins[i]) t[i] = *in.pins[i];
  Trial cur = try_tiers(in, t, slots, slots - 1);
  if (!cur.ok) return no_fit_error(in, slots);
  for (int i = 0; i < n; ++i) {
    if (in.pins[i]) continue;
    std::vector<Tier> t2 = cur.plan.tiers;
    for (int j = 0; j < n; ++j)
      if (!in.pins[j] && t2[j] != Tier::kResident) t2[j] = Tier::kRam;
    t2[i] = Tier::kResident;
    Trial tr = try_tiers(in, t2, slots, slots - 1);
    if (!tr.ok) break;
    cur = std::move(tr);
  }
  return cur.plan;
}

Result<Plan> plan_lru(const PlannerInput& in) {
  LS_RETURN_IF_ERROR(check_input(in));
  const int n = n_layers(in);
  std::vector<Tier> t(n, Tier::kRam);
  for (int i = 0; i < n; ++i)
    if (in.pins[i] && *in.pins[i] != Tier::kResident) t[i] = *in.pins[i];
  uint64_t span = 0;
  for (int i = 0; i < n; ++i) span = std::max(span, in.spans[i]);
  int slots = span ? static_cast<int>(std::min<uint64_t>(in.vram_budget / span, n)) : 0;
  if (slots < 1) return no_fit_error(in, 1);
  Trial tr = try_tiers(in, t, slots, 1);
  if (!tr.ok) return no_fit_error(in, slots);
  return tr.plan;
}

}  // namespace layerstream::sched

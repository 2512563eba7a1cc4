#include "runtime/bench/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"

namespace layerstream::bench {
namespace {

// What the session keeps per strategy while it runs.
struct Slot {
  const StrategySpec* spec = nullptr;
  StrategyResult result;
  std::unique_ptr<BenchRunner> runner;
  std::vector<std::vector<sched::TraceEvent>> pass_events;  // per measured pass
  std::vector<LayerDesc> layers;
  std::vector<sched::TraceEvent> all_events;
};

PassRecord record_of(const sched::PassSummary& s) {
  PassRecord r;
  r.pass_s = s.measured_s;
  r.stall_s = s.total_stall_s();
  r.streamed_bytes = s.streamed_bytes;
  r.predicted_s = s.predicted_s;
  r.lower_bound_s = s.lower_bound_s;
  r.sum_compute_s = s.sum_compute_s;
  r.disk_bytes = s.disk_bytes;
  r.disk_s = s.disk_s;
  r.max_reads_in_flight = s.max_reads_in_flight;
  return r;
}

Status run_one(Slot& slot, bool measured) {
  auto out = slot.runner->run_pass();
  if (!out.ok()) return out.status().WithContext(fmt::format("strategy {}", slot.spec->name));
  if (measured) {
    slot.result.passes.push_back(record_of(out->summary));
    slot.all_events.insert(slot.all_events.end(), out->events.begin(), out->events.end());
    slot.pass_events.push_back(std::move(out->events));
  }
  return Status::OK();
}

void close_runner(Slot& slot, SessionOutput& out) {
  if (!slot.runner) return;
  slot.result.plan = slot.runner->plan_description();
  slot.layers = slot.runner->layers();
  slot.result.load_bytes = slot.runner->load_bytes();
  out.link_gbps = slot.runner->link_gbps();
  out.disk_gbps = slot.runner->disk_gbps();
  slot.runner.reset();
}

void note(const SessionOptions& o, const std::string& msg) {
  if (o.progress) o.progress(msg);
}

Status create(Slot& slot) {
  auto r = slot.spec->create();
  if (!r.ok()) return r.status().WithContext(fmt::format("create the {} runner", slot.spec->name));
  slot.runner = std::move(r).value();
  return Status::OK();
}

// The error when nothing is left to run, with each strategy's skip reason.
Status all_skipped(const std::vector<Slot>& slots) {
  std::string why;
  for (const Slot& s : slots) why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", s.result.name, s.result.skip_reason);
  return Status::InvalidArgument(fmt::format("bench: every strategy was skipped ({}); nothing to measure", why));
}

}  // namespace

void fill_timeline(StrategyResult& result, const std::vector<sched::TraceEvent>& events,
                   const std::vector<LayerDesc>& layers) {
  result.timeline.clear();
  result.layers.clear();
  double origin = std::numeric_limits<double>::infinity();
  for (const auto& e : events) origin = std::min(origin, e.start_us);
  if (!std::isfinite(origin)) origin = 0;
  for (sched::TraceEvent e : events) {
    e.start_us -= origin;
    e.end_us -= origin;
    result.timeline.push_back(e);
  }
  std::sort(result.timeline.begin(), result.timeline.end(),
            [](const sched::TraceEvent& a, const sched::TraceEvent& b) { return a.start_us < b.start_us; });
  result.layers.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    result.layers[i].name = layers[i].name;
    result.layers[i].bytes = layers[i].bytes;
    result.layers[i].tier = std::string(sched::tier_name(layers[i].tier));
    result.layers[i].site = std::string(sched::site_name(layers[i].site));
  }
  // Transfer time of a layer: its H2D copy, else (direct reads) its disk read.
  std::vector<double> copy_s(layers.size(), 0), disk_s(layers.size(), 0);
  for (const auto& e : events) {
    if (e.layer < 0 || static_cast<size_t>(e.layer) >= layers.size()) continue;
    const double d = std::max(0.0, e.end_us - e.start_us) * 1e-6;
    if (e.kind == sched::TraceKind::kCompute || e.kind == sched::TraceKind::kHostCompute)
      result.layers[e.layer].compute_s += d;
    if (e.kind == sched::TraceKind::kCopy) copy_s[e.layer] += d;
    if (e.kind == sched::TraceKind::kDiskRead) disk_s[e.layer] += d;
  }
  for (size_t i = 0; i < layers.size(); ++i)
    result.layers[i].transfer_s = copy_s[i] > 0 ? copy_s[i] : disk_s[i];
}

namespace {

// The slots of `specs`; those not skipped up front go to `active`, their
// footprints summed into `footprint`.
std::vector<Slot*> active_slots(const std::vector<StrategySpec>& specs, std::vector<Slot>& slots,
                                uint64_t& footprint) {
  std::vector<Slot*> active;
  for (size_t i = 0; i < specs.size(); ++i) {
    slots[i].spec = &specs[i];
    slots[i].result.name = specs[i].name;
    if (!specs[i].skip_reason.empty()) {
      slots[i].result.skipped = true;
      slots[i].result.skip_reason = specs[i].skip_reason;
      continue;
    }
    active.push_back(&slots[i]);
    footprint += specs[i].footprint_bytes;
  }
  return active;
}

// A runner that may be skipped is created first and alone: whether it fits
// must not depend on the others. Those that do not fit leave `active`.
Status drop_what_does_not_fit(std::vector<Slot*>& active, uint64_t& footprint) {
  for (auto it = active.begin(); it != active.end();) {
    Slot& s = **it;
    if (!s.spec->skip_if_out_of_budget) {
      ++it;
      continue;
    }
    Status st = create(s);
    if (st.ok() || st.code() != StatusCode::kOutOfBudget) {
      if (!st.ok()) return st;
      ++it;  // kept for the interleaved schedule
      continue;
    }
    s.result.skipped = true;
    s.result.skip_reason = st.message();
    footprint -= s.spec->footprint_bytes;
    it = active.erase(it);
  }
  return Status::OK();
}

// Creates every runner for the interleaved schedule. Returns whether to fall
// back to blocks (a runner out of budget beside the others; the reason in
// out.schedule_reason), or the error.
Result<bool> create_all(const std::vector<Slot*>& active, SessionOutput& out) {
  Status st;
  size_t alive = 0;  // runners that exist when one fails to be created
  for (Slot* s : active) {
    if (!s->runner) st = create(*s);
    if (!st.ok()) break;
    ++alive;
  }
  if (st.ok()) return false;
  // Falling back helps only when the failing runner would fit alone.
  if (st.code() != StatusCode::kOutOfBudget || alive == 0) return st;
  for (Slot* s : active) s->runner.reset();
  out.schedule_reason = "creating every runner at once failed: " + st.message();
  return true;
}

Status run_interleaved(const std::vector<Slot*>& active, const SessionOptions& o, uint64_t footprint,
                       SessionOutput& out) {
  out.schedule = "interleaved";
  if (out.schedule_reason.empty())
    out.schedule_reason = fmt::format("{} runners side by side, {} together", active.size(), format_bytes(footprint));
  note(o, fmt::format("bench: interleaved, {} strategies, {} warm-up + {} rounds of ({} settle + 1 measured) "
                      "passes each",
                      active.size(), o.warmup, o.passes, o.settle_passes));
  const size_t n = active.size();
  for (int round = 0; round < o.warmup; ++round)
    for (size_t k = 0; k < n; ++k) LS_RETURN_IF_ERROR(run_one(*active[(k + round) % n], false));
  for (int round = 0; round < o.passes; ++round) {
    for (size_t k = 0; k < n; ++k) {
      Slot& s = *active[(k + round) % n];
      for (int i = 0; i < o.settle_passes; ++i) LS_RETURN_IF_ERROR(run_one(s, false));
      LS_RETURN_IF_ERROR(run_one(s, true));
    }
  }
  for (Slot* s : active) close_runner(*s, out);
  return Status::OK();
}

Status run_blocks(const std::vector<Slot*>& active, const SessionOptions& o, SessionOutput& out) {
  out.schedule = "blocks";
  for (Slot* s : active) s->runner.reset();
  const int rounds = std::clamp(o.block_rounds, 1, o.passes);
  note(o, fmt::format("bench: strategy-by-strategy blocks over {} rounds ({})", rounds, out.schedule_reason));
  for (int round = 0; round < rounds; ++round) {
    const int in_round = o.passes / rounds + (round < o.passes % rounds ? 1 : 0);
    for (size_t k = 0; k < active.size(); ++k) {
      Slot& s = *active[(k + round) % active.size()];
      LS_RETURN_IF_ERROR(create(s));
      for (int w = 0; w < o.warmup; ++w) LS_RETURN_IF_ERROR(run_one(s, false));
      for (int p = 0; p < in_round; ++p) LS_RETURN_IF_ERROR(run_one(s, true));
      close_runner(s, out);
    }
  }
  return Status::OK();
}

// Each strategy's result, with the pass closest to the median time in its timeline.
void collect_results(std::vector<Slot>& slots, SessionOutput& out) {
  for (Slot& s : slots) {
    if (!s.result.skipped && !s.result.passes.empty()) {
      std::vector<double> t;
      for (const auto& p : s.result.passes) t.push_back(p.pass_s);
      const double med = planning::summarize(t).median;
      size_t pick = 0;
      for (size_t i = 1; i < t.size(); ++i)
        if (std::abs(t[i] - med) < std::abs(t[pick] - med)) pick = i;
      fill_timeline(s.result, s.pass_events[pick], s.layers);
    }
    out.trace.push_back(std::move(s.all_events));
    out.strategies.push_back(std::move(s.result));
  }
}

}  // namespace

Result<SessionOutput> run_session(const std::vector<StrategySpec>& specs, const SessionOptions& o) {
  if (o.passes < 1) return Status::InvalidArgument(fmt::format("bench: --passes must be >= 1, got {}", o.passes));
  if (o.warmup < 0) return Status::InvalidArgument(fmt::format("bench: --warmup must be >= 0, got {}", o.warmup));
  std::vector<Slot> slots(specs.size());
  uint64_t footprint = 0;
  std::vector<Slot*> active = active_slots(specs, slots, footprint);
  if (active.empty()) return all_skipped(slots);

  SessionOutput out;
  bool blocks = o.force_blocks;
  auto too_big = [&] {
    return fmt::format("{} runners need {} together, {} available", active.size(), format_bytes(footprint),
                       format_bytes(o.memory_available));
  };
  if (blocks) {
    out.schedule_reason = "blocks forced";
  } else if (o.memory_available > 0 && footprint > o.memory_available) {
    blocks = true;
    out.schedule_reason = too_big();
  }
  LS_RETURN_IF_ERROR(drop_what_does_not_fit(active, footprint));
  if (active.empty()) return all_skipped(slots);
  if (!blocks && o.memory_available > 0 && footprint > o.memory_available) {
    blocks = true;
    out.schedule_reason = too_big();
  }
  if (!blocks) {
    LS_ASSIGN_OR_RETURN(blocks, create_all(active, out));
  }
  LS_RETURN_IF_ERROR(blocks ? run_blocks(active, o, out) : run_interleaved(active, o, footprint, out));
  collect_results(slots, out);
  return out;
}

}  // namespace layerstream::bench

// Executor: runs passes over a list of layers, streaming the non-resident
// ones through a window in the device arena while earlier layers compute,
// following a Plan from the planner.
//
// Streams: `compute` runs the layers' work (and the caller's small copies:
// tokens, logits); `copy` fills the window from the RAM tier; `disk copy`
// (staged disk path only) carries the H2D copies the disk thread issues.
// RAM-tier copies are issued in chunks of at most `copy_chunk_bytes`.
//
// The window is a ring of variable-size regions (window_ring.h): each
// streamed layer takes its own span. Streamed layers are counted globally
// over passes (g); layer g's load waits for the compute of g - W (W =
// prefetch depth + 1) and of the latest earlier layer whose region it
// overwrites; its "loaded" event (loaded_[g % E]) is waited on by the compute
// stream, its "done" event (done_[g % E]) is recorded after its compute. A
// load is enqueued only once the compute it waits for has been enqueued, so
// every event waited on has been recorded. At the end of a pass the loads of
// the next pass's first streamed layers are already enqueued.
//
// Disk tier (disk_loader.h): a disk thread owns the readers. Direct path
// (host-addressable device memory): it reads a layer straight into its
// region once the region is free. Staged path (device memory only copies
// reach; every GPU): it reads chunks of staging_buffer_bytes into registered
// pinned staging buffers with many reads in flight over several layers,
// issues each chunk's H2D copy on the disk-copy stream as soon as the chunk
// lands (in layer order), and reuses a buffer only after the event recorded
// behind its copy completes. No stream ever runs a blocking host function:
// the thread that calls run_pass waits (on the host) until the disk thread
// has issued a disk layer's last copy before it enqueues that layer's
// compute, so a failed read fails the pass with the read's error.
//
// Start-up: the arena (the whole VRAM budget, one allocation) is carved into
// the caller's reserve, resident layers and the window; RAM-tier layers are
// loaded once into pinned buffers. Nothing is allocated on the device
// afterwards. A new plan (re-plan, batch-class change) moves only the
// difference: residents that stay resident keep their place and bytes, RAM
// copies that stay are kept; load_bytes() counts what was loaded.
//
// Files, one job each: start-up, validation and probes (executor.cpp); plan
// application, arena carving and loads (executor_placement.cpp); the pass
// loop and the window's loads (executor_pass.cpp); drift and re-plan policy
// (executor_replan.cpp); measuring a finished pass (pass_collector.cpp); the
// host lane (host_lane.cpp); the disk tier (disk_loader.cpp,
// staged_disk_loop.cpp).
//
// Thread safety: one thread calls run_pass() and the other methods. The
// state shared with the disk thread and the compute stream's host functions
// is the DiskLoader's, LS_GUARDED_BY its own lock (clang checks it:
// -Werror=thread-safety).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/reader.h"
#include "runtime/device/device.h"
#include "runtime/scheduler/cost_model.h"
#include "runtime/scheduler/disk_loader.h"
#include "runtime/scheduler/executor_options.h"
#include "runtime/scheduler/layer.h"
#include "runtime/scheduler/plan.h"
#include "runtime/scheduler/planner.h"
#include "runtime/scheduler/replan_gate.h"
#include "runtime/scheduler/trace.h"
#include "runtime/scheduler/window_ring.h"

namespace layerstream::sched {

// Measured costs of one finished pass.
struct PassStats {
  PassSummary summary;
  std::vector<double> compute_s;   // per layer
};

class Executor {
 public:
  // Plans (or validates options.plan), carves the arena and loads residents
  // and RAM-tier layers. Errors: InvalidArgument for bad layers/options,
  // OutOfBudget (bytes needed and available) when the budgets cannot hold one
  // window plus the reserve or the pinned placement, IOError from loading.
  static Result<std::unique_ptr<Executor>> create(Device& device, std::vector<LayerSpec> layers,
                                                  ExecutorOptions options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs every layer once, in order, and waits for the compute stream.
  // `batch_tokens` selects the cost-model class; a class change re-plans.
  Status run_pass(int batch_tokens = 1);

  // Re-plans now (at this pass boundary) from the current cost model; applies
  // the new plan when its placement differs and it beats the current plan by
  // replan_min_gain. Returns whether the placement changed.
  Result<bool> replan();

  const Plan& plan() const { return plan_; }
  const CostModel& cost_model() const { return cost_; }
  CostModel& mutable_cost_model() { return cost_; }
  TraceRecorder& trace() { return trace_; }
  const PassStats& last_pass() const { return last_; }
  uint64_t passes_run() const { return pass_; }
  // Plan changes that moved the placement (re-plans that kept it are not counted).
  int replans() const { return replans_; }
  const std::vector<uint64_t>& layer_bytes() const { return bytes_; }
  std::vector<std::string> layer_names() const;
  // Bytes loaded into resident regions and RAM-tier buffers so far (start-up
  // and re-plans; not the per-pass streaming): what sharing one executor
  // between contexts saves.
  uint64_t load_bytes() const { return load_bytes_; }
  // The RAM-tier copy of layer i (its `bytes` bytes), or nullptr when layer i
  // is not in the RAM tier now. Valid until the next plan change.
  const void* ram_copy(int layer) const;
  // Host-readable bytes of resident layer i, or nullptr (not resident, or the
  // device memory is not host-addressable). Valid until the next plan change.
  const void* resident_host_view(int layer) const;
  // The caller's reserved region (reserved_vram bytes; ptr null when 0).
  const ArenaRegion& reserved() const { return reserved_; }
  Stream& compute_stream() { return *compute_; }
  // The planner input the executor uses (for baselines and diagnostics).
  PlannerInput planner_input(int batch_class) const;
  // Replaces the plan (validated against the budgets) at this pass boundary.
  Status apply_plan(Plan plan);

 private:
  Executor(Device& device, std::vector<LayerSpec> layers, ExecutorOptions options);

  // Start-up (executor.cpp), in init()'s order.
  Status init();
  Result<uint64_t> check_options_and_layers();
  Status create_streams();
  Status check_placement_possible(uint64_t reserve);
  Status probe_link();
  Status probe_disk();
  Status load_layer_to_host(int layer, void* dst);
  // Waits until nothing is in flight (disk jobs finished or dropped, every
  // stream idle); a new epoch of streamed-layer numbering. The first error.
  Status drain();
  // A new epoch of streamed-layer numbering (g from 0) at this pass boundary.
  // REQUIRES: drained (nothing in flight, no disk job pending).
  void reset_stream_state();

  // apply_plan's steps, in order (executor_placement.cpp).
  Status check_plan(const Plan& p) const;
  Status size_plan(Plan& p, const PlannerInput& in) const;
  void count_load_total(const Plan& p);
  bool same_placement(const Plan& p) const;
  void adopt_unchanged_placement(Plan p);
  Status carve_arena(const Plan& p, std::vector<bool>& fresh);
  Result<uint64_t> load_new_residents(const std::vector<bool>& fresh);
  Status load_resident_through_bounce(int layer);
  Result<uint64_t> load_ram_tier(const Plan& p);
  Status adopt_plan(Plan p);
  Status create_events();

  // The pass loop (executor_pass.cpp).
  Status replan_for_class(int cls);
  Status run_layers(uint64_t pass, int batch_tokens);
  Status run_layer(int layer, uint64_t pass, int batch_tokens);
  // Where the activations are in a pass: the host site after a host-site
  // layer, until the next device layer brings them back.
  Status run_host_site_layer(int layer, uint64_t pass, int batch_tokens, bool entering);
  Status leave_host_site(uint64_t pass, int batch_tokens, int next_layer);
  Status finish_pass(uint64_t pass, int cls);
  // Loads of the streamed layers up to W ahead of `computing` (further for
  // staged disk layers), each once the compute it waits for is enqueued.
  Status enqueue_ready_copies(uint64_t computing);
  Status enqueue_copy(uint64_t g);
  void post_disk_job(uint64_t g, int layer, uint8_t* dst, int64_t need, uint64_t pass, int slot, int k);
  int events_per_ring() const { return plan_.slots + 1; }

  // Drift and re-plan policy (executor_replan.cpp).
  Status replan_if_due(int cls);
  bool drifted(int cls) const;
  // replan()'s body; `confirmations` > 1 (re-plans on drift): the new
  // placement must have been proposed that many times in a row (ReplanGate).
  // `from_hints`: the current plan was made before any measurement, so the
  // first measured plan replaces it without the minimum-gain test (that test
  // keeps noise between measured plans from moving bytes; a hint is no
  // measurement to defend).
  Result<bool> replan_confirmed(int confirmations, bool from_hints = false);
  // Keeps the placement, with the figures of `p` (the current plan re-evaluated).
  void keep_plan(const Plan& p);

  // Measuring a finished pass (pass_collector.cpp): per-layer compute and
  // copy times into the cost model and the trace, the disk thread's reads,
  // then the pass summary.
  struct PassSpan {
    double begin_us = 0, end_us = 0;  // the pass's first and last compute, event microseconds
    uint64_t ram_bytes = 0;           // copied from the RAM tier
  };
  Status collect_pass(uint64_t pass, int cls);
  Result<double> event_us(const Event& e) const;
  Result<PassSpan> collect_layer_times(uint64_t pass, int cls, PassStats& st);
  Status collect_layer_copy(int layer, int k, uint64_t pass, int slot, PassStats& st, PassSpan& span);
  void collect_disk_reads(PassStats& st);
  void summarize_pass(PassStats& st, int cls, const PassSpan& span);

  // Host lane (host_lane.cpp).
  Status prepare_host_lane();
  Status open_host_reader(const std::string& path);
  Status run_host_layer(LayerRun& run, bool entering);
  Status leave_host_lane(uint64_t pass, int batch_tokens);
  // The timed activation crossings and split halves of `pass` into the cost model.
  Status collect_crossings(uint64_t pass, int cls);
  // A split layer (Site::kSplit): the host lane, its host bytes and fraction
  // in `run`, a start mark on the host lane; after its compute, an end mark.
  Status begin_split_layer(LayerRun& run);
  Status end_split_layer(const LayerRun& run);
  double host_us() const;
  // Every layer has a compute sample in `cls` at the site the plan gives it.
  bool measured_at_sites(int cls) const;

  // The layers and options, fixed after init().
  Device& dev_;
  std::vector<LayerSpec> layers_;
  ExecutorOptions opt_;
  std::vector<uint64_t> bytes_, spans_;
  int n_ = 0;
  bool disk_direct_ = false;

  // Placement: the arena's regions and the RAM tier (executor_placement.cpp).
  std::unique_ptr<Arena> arena_;
  ArenaRegion reserved_;
  std::vector<ArenaRegion> resident_;   // per layer (ptr null unless resident)
  ArenaRegion window_;                  // the window ring
  std::vector<HostBuffer> ram_;         // per layer (RAM tier)
  HostBuffer bounce_;                   // resident loads on devices that are not host-addressable
  uint64_t load_bytes_ = 0;
  uint64_t load_total_ = 0;      // bytes the current apply_plan loads (progress)
  uint64_t load_done_ = 0;

  // Streams and events.
  std::unique_ptr<Stream> compute_, copy_, disk_copy_;
  std::vector<std::unique_ptr<Event>> loaded_, done_;  // [g % events_per_ring()]
  // Timing: [parity][layer] compute start/end; [parity][streamed k] copy start/end.
  std::vector<std::unique_ptr<Event>> c_start_[2], c_end_[2], k_start_[2], k_end_[2], pass_begin_;
  std::unique_ptr<Event> ref_;
  std::chrono::steady_clock::time_point host_ref_;

  // The plan in force and what it was made from.
  CostModel cost_;
  Plan plan_;
  std::vector<double> plan_compute_;    // the compute estimates the plan was made with
  bool plan_measured_ = false;          // plan made from measured (not hinted) costs
  std::vector<int> streamed_;           // layer indices streamed, in order
  std::vector<int> stream_index_;       // per layer: k in streamed_, or -1
  int replans_ = 0;
  ReplanGate replan_gate_;
  TraceRecorder trace_;
  PassStats last_;

  // The pass loop's position.
  uint64_t pass_ = 0;             // passes run
  uint64_t epoch_pass_ = 0;       // pass at which the current plan started
  uint64_t g_compute_ = 0;        // next streamed layer to compute (global within the plan epoch)
  uint64_t g_copy_ = 0;           // next streamed layer to enqueue a load for
  WindowSchedule window_schedule_;  // where streamed layer g goes in the window

  // Disk tier: its thread, readers, staging ring and counters.
  std::unique_ptr<DiskLoader> disk_;

  // Host lane: host-site layers' compute, in pass order, on a host-backend
  // stream of its own (whatever the device backend).
  std::unique_ptr<Device> host_dev_;
  std::unique_ptr<Stream> host_lane_;
  std::unique_ptr<Event> to_host_;          // activations copied to the host (recorded on compute_)
  // The first crossing each way of a pass, timed on compute_: [parity][to host
  // begin, end, to device begin, end]; cross_rec_[parity][direction]: recorded.
  std::unique_ptr<Event> cross_ev_[2][4];
  bool cross_rec_[2][2] = {};
  std::vector<SplitTiming> split_t_[2];     // [parity][layer]: a split layer's halves, as its callback reported
  std::vector<bool> split_reported_;        // per layer: its split callback reports its halves
  std::vector<double> host_ts_[2];          // [parity][2 * layer + {0 start, 1 end}], us since host_ref_
  std::vector<uint8_t> host_scratch_;       // a disk-tier host layer's bytes, read each pass
  // The host lane's reads of disk-tier layers this pass (written on the host
  // lane, taken by collect_disk_reads once the lane is idle): the disk rate
  // counts them beside the disk thread's.
  std::vector<TraceEvent> host_disk_reads_;
  // Readers of the files the host lane reads (buffered: page cache); used
  // on the host lane's thread only.
  std::map<std::string, std::unique_ptr<io::Reader>> host_readers_;
};

}  // namespace layerstream::sched

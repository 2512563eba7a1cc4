// Streaming your own layers: the model-agnostic streaming scheduler behind
// layerstream::Model, for an app's own layers. A layer is a byte span with a
// source (host memory or a file) and a compute function; the Streamer keeps
// as many layers resident in the device budget as fit, streams the rest from
// pinned RAM or disk through a window of slots while earlier layers compute,
// and calls each layer's compute function once per pass, in order.
//
//   std::vector<layerstream::StreamedLayer> layers = ...;  // bytes + source + compute
//   auto s = layerstream::Streamer::create(std::move(layers), {.vram_budget = 256 << 20});
//   if (!s.ok()) return s.status();
//   if (auto st = (*s)->run_pass(); !st.ok()) return st;
//
// Ownership: the Streamer owns its device resources (arena, streams, pinned
// buffers, readers). `host_data` stays the caller's: it must outlive the
// Streamer and is never written. Thread safety: one thread at a time calls a
// Streamer's methods; compute functions run on that thread (see LayerCall).
// Errors are Status values (status.h); nothing here prints to stdout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {

// Where a layer's bytes live between uses.
enum class LayerHome {
  kResident,  // in device memory for the Streamer's lifetime
  kRam,       // in pinned host RAM (loaded once at create()), copied to the device every pass
  kDisk,      // read from its file every pass
};

// What a compute function is given for one layer in one pass.
struct LayerCall {
  int layer = 0;                 // index into the list given to create()
  uint64_t pass = 0;             // 0-based pass number since create()
  // Device pointer to the layer's `bytes` bytes (host backend: host-addressable
  // memory). Valid for work enqueued in compute-stream order by this call
  // (kernels on native_stream, or enqueue_host), not after it.
  const void* data = nullptr;
  uint64_t bytes = 0;
  LayerHome home = LayerHome::kResident;
  int slot = -1;                 // window slot index; -1 when resident
  int batch_tokens = 1;          // as passed to run_pass
  void* native_stream = nullptr; // the compute stream: a cudaStream_t on CUDA, nullptr on host
  // Runs `fn` in compute-stream order, after the work enqueued before it and
  // before the next layer's (host backend: on its worker thread; CUDA:
  // cudaLaunchHostFunc). Returns once enqueued; a non-OK Status from `fn`
  // fails the pass (run_pass returns it). `fn` must not call the Streamer.
  std::function<Status(std::function<Status()> fn)> enqueue_host;
};

// One layer. Exactly one source: `host_data` (caller-owned) or `file` +
// `file_offset` (read directly, O_DIRECT where possible).
struct StreamedLayer {
  std::string name;                  // for logs and traces; "" = "layer<i>"
  uint64_t bytes = 0;                // > 0
  const void* host_data = nullptr;
  std::string file;
  uint64_t file_offset = 0;          // bytes
  // Force the layer's home; nullopt = the planner's choice. kDisk needs a
  // file; a host_data layer that streams is copied once into pinned RAM
  // (counts against ram_budget).
  std::optional<LayerHome> pin;
  double compute_hint_s = 0;         // expected compute seconds before measurement (0 = unknown)
  // Enqueues the layer's work and returns without waiting for it. Called on
  // the thread that calls run_pass(), once per layer per pass, in layer order.
  std::function<Status(const LayerCall&)> compute;
};

struct StreamerOptions {
  std::string backend = "auto";      // "auto" (cuda when a device is present), "host", "cuda"
  uint64_t vram_budget = 0;          // device bytes for resident layers and slots; > 0
  uint64_t ram_budget = 0;           // pinned host bytes for RAM-home layers and disk staging
  double sim_link_gbps = 0;          // host backend: throttle host-to-device copies, GB/s (0 = off)
  bool serial = false;               // baseline: one slot, load then compute, no overlap
  std::string io = "auto";           // disk reads: "auto", "uring", "pread", "buffered"
  bool trace = false;                // record events for write_trace()
};

// Figures of the last finished pass (milliseconds unless named otherwise).
struct StreamerStats {
  uint64_t pass = 0;
  double measured_ms = 0;            // wall time of the pass on the compute stream
  double predicted_ms = 0;           // the planner's simulated time for the plan in force
  double lower_bound_ms = 0;         // max(sum of compute, time to move the streamed bytes)
  double overlap_efficiency = 0;     // lower_bound_ms / measured_ms (1 = perfect overlap)
  double stall_ms = 0;               // compute waiting for loads, summed over layers
  uint64_t streamed_bytes = 0;       // bytes moved to the device this pass
};

class Streamer {
 public:
  // Opens the backend, plans where each layer lives, allocates the whole
  // vram_budget once and loads resident and RAM-home layers. Errors:
  // InvalidArgument (bad options or layers), OutOfBudget (the budgets cannot
  // hold one window or the pinned layers; says bytes needed and available),
  // IOError (a file), DeviceError. No compute function runs before run_pass().
  static Result<std::unique_ptr<Streamer>> create(std::vector<StreamedLayer> layers,
                                                 StreamerOptions options);
  ~Streamer();
  Streamer(const Streamer&) = delete;
  Streamer& operator=(const Streamer&) = delete;

  // Runs every layer once, in order, and waits until all their work is done.
  // `batch_tokens` (>= 1) selects the cost class; the plan adapts to measured
  // compute times between passes. Returns the first error of a load or compute.
  Status run_pass(int batch_tokens = 1);

  StreamerStats last_pass() const;   // zeros before the first pass
  uint64_t passes_run() const;
  LayerHome home(int layer) const;   // the current plan's home; layer in [0, number of layers)
  // One line: "6 resident [...], 2 ram, 2 disk; 3 slots x 1.00 MiB, depth 2; predicted ..., bound ...".
  std::string plan_description() const;
  // Chrome trace-event JSON (Perfetto / about:tracing) of the passes so far;
  // InvalidArgument unless options.trace was set, IOError on write failure.
  Status write_trace(const std::string& path) const;

 private:
  struct Impl;
  explicit Streamer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace layerstream

// Layer descriptions for the streaming scheduler: what a layer is (a byte span
// with a source and an optional pinned home tier) and what its compute
// callback is given. Model-agnostic: the scheduler never looks inside a layer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {
class Stream;
}

namespace layerstream::sched {

// Where a layer's bytes live between uses.
enum class Tier : uint8_t {
  kResident,  // in the device arena for the whole run (never moves)
  kRam,       // in pinned host RAM (loaded once at start-up), copied H2D every pass
  kDisk,      // read from its file every pass (staging ring, or straight into the slot)
};

std::string_view tier_name(Tier tier);  // "resident", "ram", "disk"

// Where a layer's compute runs (hybrid execution).
//   kDevice: on the device, from its resident region or a window region
//            (streamed); today's behaviour.
//   kHost:   on the host lane, with the CPU kernels, from host memory: its
//            RAM-tier copy or caller-owned host_data (tier kRam), or a host
//            buffer read from its file each pass through the page cache
//            (tier kDisk). Its bytes never enter the device window; only
//            activations cross (the executor's activations_to_host /
//            activations_to_device hooks). Never with tier kResident.
//   kSplit:  split by output rows (tier kRam only). Each matmul weight the
//            layer lists in LayerSpec::split_tensors has rows [0, r) computed
//            on the device, rows [r, n) on the host lane from the RAM copy
//            (r = split_rows(n, Plan::device_rows)); only rows [0, r) of
//            those tensors, and every byte outside them (norms, biases),
//            cross the link, into a window region laid out as the whole
//            layer. Everything else of the layer (norms, attention and its
//            KV cache, activations) stays on the device. The callback joins
//            the halves' outputs (LayerRun::host_lane, host_data).
enum class Site : uint8_t { kDevice, kHost, kSplit };
std::string_view site_name(Site site);  // "device", "host", "split"

// A row-major weight in a layer whose output rows can split: `rows` rows of
// bytes / rows bytes each, starting `offset` bytes into the layer's bytes.
// Quantised rows are whole blocks, so a row range is a byte range.
struct SplitTensor {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  int64_t rows = 0;
};

// Rows computed on the device for `rows` output rows at device fraction f:
// f * rows rounded to a multiple of kSplitRowAlign (the kernels' row tiles
// then line up on both halves), clamped to [0, rows]. The executor (which
// bytes to copy) and the compute callback (which rows to compute) both use it.
inline constexpr int64_t kSplitRowAlign = 32;
int64_t split_rows(int64_t rows, double device_fraction);

// What a compute callback is given for one layer in one pass.
struct LayerRun {
  int layer = 0;           // index into the executor's layer list
  uint64_t pass = 0;       // 0-based pass number since the executor started
  void* data = nullptr;    // device pointer to the layer's `bytes` bytes (slot or resident region)
  uint64_t bytes = 0;
  Tier tier = Tier::kResident;
  int slot = -1;           // window slot index; -1 when resident
  int batch_tokens = 1;    // as passed to Executor::run_pass
  // kHost: `data` is host memory (never device memory) and `compute` is the
  // executor's host lane (a host-backend stream: the CPU kernels run on it),
  // whatever the device backend; the activations are where
  // ExecutorOptions::activations_to_host put them.
  Site site = Site::kDevice;
  // kSplit: `data` is the device region (rows [0, split_rows(n, device_rows))
  // of each split tensor are valid there), `host_data` the layer's whole
  // bytes in host memory, `host_lane` the executor's host lane (a host-
  // backend stream) for the host half. The callback enqueues both halves and
  // joins them; it may wait on this thread for the host lane at a join.
  const void* host_data = nullptr;
  Stream* host_lane = nullptr;
  double device_rows = 1.0;
};

// Enqueues the layer's work on `compute` (kernels, or host_func on the host
// backend) and returns; it must not block on that work. Called on the thread
// that calls Executor::run_pass. `run.data` is valid for the work enqueued on
// `compute` by this call, and not after it.
using ComputeFn = std::function<Status(const LayerRun& run, Stream& compute)>;

// One layer. Exactly one source: `host_data` (caller-owned, must outlive the
// executor, never written by it) or `file` + `file_offset` (read through
// io::Reader; the aligned superset of [file_offset, file_offset + bytes) is read).
struct LayerSpec {
  std::string name;                 // for logs and traces; "" = "layer<i>"
  uint64_t bytes = 0;               // > 0
  const void* host_data = nullptr;
  std::string file;
  uint64_t file_offset = 0;
  std::optional<Tier> pin;          // the user's forced home; nullopt = the planner's choice
  double compute_hint_s = 0;        // expected compute seconds before measurement (0 = unknown)
  // The compute callback can run this layer on the host site (LayerRun::site);
  // false keeps the layer on the device whatever the plan policy.
  bool host_ok = false;
  // Weights whose output rows the layer's compute can split between device
  // and host (Site::kSplit); empty = the layer never splits. Sorted by
  // offset, not overlapping.
  std::vector<SplitTensor> split_tensors;
  ComputeFn compute;

  bool from_file() const { return !file.empty(); }
};

}  // namespace layerstream::sched

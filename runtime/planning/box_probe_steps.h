// The steps of probe_box (box_probe.h), one file each: the device's link and
// matmul rates (probe_device.cpp), the disk through each I/O path
// (probe_disk.cpp), the host site (probe_host.cpp); and what they share.
// Internal to runtime/bench. Thread safety: as probe_box.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "kernels/kernels.h"
#include "layerstream/status.h"
#include "runtime/planning/box_probe.h"
#include "runtime/device/device.h"

namespace layerstream::planning::probe_steps {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A progress line to ProbeOptions::progress, when there is one.
inline void note(const ProbeOptions& o, const std::string& s) {
  if (o.progress) o.progress(s);
}

// Repeats `batch` (which enqueues work on `stream`) until `seconds` of device
// time have been measured (at least once); returns (repetitions, seconds).
Result<std::pair<int, double>> time_on_stream(Device& dev, Stream& stream, double seconds,
                                              const std::function<Status()>& batch);

// The matmul of a probe point over regions already filled.
kernels::MatmulParams matmul_params(const ArenaRegion& w, const ArenaRegion& x, const ArenaRegion& y,
                                    const ArenaRegion& scratch, uint64_t scratch_bytes, GgmlType type, int64_t n_out,
                                    int64_t n_in, int tokens);

// Times `p` on `stream` for `seconds` after one warm-up run (pages touched,
// host pool awake) and describes it as a probe point.
Result<ComputePoint> time_matmul_point(Device& dev, kernels::Kernels& k, Stream& stream, const kernels::MatmulParams& p,
                                       uint64_t w_bytes, double seconds);

// One arena holding a probe matmul's weights, activations, outputs and
// scratch (no scratch region when scratch_bytes is 0), named name-w, name-x...
struct MatmulArena {
  std::unique_ptr<Arena> arena;
  ArenaRegion w, x, y, scratch;
};
Result<MatmulArena> matmul_arena(Device& dev, const std::string& name, uint64_t w_bytes, uint64_t x_bytes,
                                 uint64_t y_bytes, uint64_t scratch_bytes);

// H2D rate from pinned and pageable memory at each chunk size.
Status probe_h2d(Device& dev, const ProbeOptions& o, BoxProfile& out);
// Decode- and prefill-shaped matmul rates per weight type on the device.
Status probe_compute(Device& dev, const ProbeOptions& o, BoxProfile& out);
// The disk file's read rate through each I/O path, page cache dropped first.
Status probe_disk(const ProbeOptions& o, BoxProfile& out);
// The host site's figures: RAM read bandwidth and CPU matmul rates.
Status probe_host(const ProbeOptions& o, const DeviceInfo& main_device, BoxProfile& out);

}  // namespace layerstream::planning::probe_steps

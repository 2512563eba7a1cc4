// The box profile as the planner reads it: link, disk, the device's matmul
// rates and the host site's (RAM bandwidth, CPU matmul rates), from the JSON
// that `layerstream probe --json` writes or a person writes by hand for a box
// they do not have (docs/BOX_PROFILE.md), and the per-layer compute time
// estimates made from them.
//
// Estimates: a matmul of `tokens` tokens takes max(weight bytes / decode
// GB/s, 2 x n_out x n_in x tokens / prefill GFLOP/s) of its type (decode is
// memory-bound: every weight byte read once; prefill is compute-bound).
// A type the table lacks takes the same shape's point of another type (GB/s
// carry over between types for decode: both are reads of bytes). On the host
// site with no decode point at all, the decode rate is the RAM read rate.
// Units: GB/s = 1e9 B/s, GFLOP/s = 1e9 flop/s, seconds.
// Thread safety: plain values.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "io/reader.h"
#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"
#include "runtime/planning/box_probe.h"

namespace layerstream::planning {

// Matmul rates per (type name, shape "decode" / "prefill").
struct RateTable {
  std::map<std::pair<std::string, std::string>, ComputePoint> points;
  // The point for `type` and `shape`, else the same shape of any type;
  // nullptr when the table has none of that shape.
  const ComputePoint* find(const std::string& type, const std::string& shape) const;
  bool empty() const { return points.empty(); }
};

// Seconds of one matmul [n_out x n_in] of `type` (`bytes` of weights) over
// `tokens` tokens; `decode_gbps_fallback` is used when the table has no decode
// point (0: none). 0 when the table has nothing to go on.
double matmul_seconds(const RateTable& rates, GgmlType type, int64_t n_out, int64_t n_in, uint64_t bytes, int tokens,
                      double decode_gbps_fallback = 0);

struct BoxFigures {
  std::string source;            // "box file PATH"
  std::string backend, device_name;  // the "box" object's backend and device
  std::string host_cpu;          // host.cpu ("" when unknown)
  std::string notes;             // "notes" (free text: where hand-written figures come from)
  double link_gbps = 0;          // pinned H2D
  double disk_gbps = 0;          // of the I/O path asked for when the file has it
  RateTable device;              // "compute": the device's matmuls
  RateTable host;                // "host.compute": the CPU fast path on host memory
  int host_threads = 0;
  double ram_read_gbps = 0;      // 0: not in the file
  bool has_host() const { return !host.empty() || ram_read_gbps > 0; }
  // The host backend's device is the CPU: its layers run the host kernels, so
  // with host figures present they serve as the device's too.
  const RateTable& device_rates() const { return backend == "host" && !host.empty() ? host : device; }
};

// Parses a box profile. Errors name `source`: Corruption when the document is
// not a profile (no probe_version, link_gbps missing or 0, a rate that is not
// a non-negative number, a compute point without type/shape) or has no
// device compute figures.
Result<BoxFigures> box_figures_from_json(const nlohmann::json& doc, const std::string& source,
                                         io::IoPath io_path = io::IoPath::kAuto);
// The same from a file: NotFound/IOError when unreadable, Corruption when not JSON.
Result<BoxFigures> load_box_figures(const std::string& path, io::IoPath io_path = io::IoPath::kAuto);

// Whether a profile describes this machine: the backend matches, the host
// CPU when both name one, and the device name (on the host backend the CPU
// alone decides when known: its device name counts the threads).
bool box_is_this_machine(const BoxFigures& box, const std::string& backend, const std::string& device);

}  // namespace layerstream::planning

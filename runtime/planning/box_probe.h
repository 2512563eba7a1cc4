// probe: measures the box the way the planner needs it, and reads the result
// back as the planner's prior.
//  - H2D bandwidth from pinned and pageable host memory at several chunk
//    sizes, timed by device events on a copy stream;
//  - disk read bandwidth of a file through each I/O path (io_uring O_DIRECT,
//    pread O_DIRECT, buffered), the file's pages dropped from the page cache
//    first (posix_fadvise DONTNEED) and the cached fraction checked (mincore)
//    and reported; reads are bounded in bytes and in time;
//  - matmul rate per weight type, decode-shaped (1 token) and prefill-shaped
//    (n tokens): GB/s of weights and GFLOP/s, timed by device events;
//  - device memory;
//  - the host site of hybrid execution, whatever the device backend: RAM
//    read bandwidth (all compute threads reading one large buffer) and the
//    CPU kernels' fast-path matmul rate per weight type on host memory:
//    decode (1 token, a matrix well above the caches: weight GB/s) and
//    prefill (a cache-blocked GEMM: multiply-adds per second).
// Units: GB/s = 1e9 bytes per second; GFLOP/s = 1e9 flop per second (2 per
// multiply-add); GMAC/s = 1e9 multiply-adds per second. The JSON written by
// to_json is the box profile documented in docs/BOX_PROFILE.md.
// Thread safety: probe_box() uses its own device; call from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/reader.h"
#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"
#include "runtime/device/device.h"

namespace layerstream::planning {

struct ProbeOptions {
  DeviceOptions device;
  std::vector<uint64_t> chunk_bytes = {64 << 10, 1 << 20, 16 << 20, 64 << 20};
  double seconds_per_point = 0.25;     // time spent on each bandwidth / rate point (at least one repetition)
  bool h2d = true;
  // Disk: `disk_file` when set; otherwise a scratch file of scratch_bytes in
  // scratch_dir (default: the temp directory), removed afterwards. Empty
  // io_paths or disk = false: no disk figures.
  bool disk = true;
  std::string disk_file;
  std::string scratch_dir;
  uint64_t scratch_bytes = 256ull << 20;
  uint64_t disk_region_bytes = 1ull << 30;  // at most this much of the file is read per path
  double disk_seconds_per_path = 3.0;       // and for at most about this long
  // The read pattern: requests of this many bytes (each read in the reader's
  // 1 MiB chunks, up to 16 in flight), this many requests outstanding. The
  // default keeps the queue full; a plan mirrors its executor instead (the
  // host path reads one layer at a time, so each read ramps up and drains).
  uint64_t disk_request_bytes = 8 << 20;
  int disk_requests_in_flight = 4;
  size_t disk_reader_chunk_bytes = 1 << 20;  // the reader's chunk (its queue depth: 16, or the requests in flight)
  // Read the region again from its start until disk_seconds_per_path is up
  // (a rate averaged over seconds, not one pass over a small region: a
  // shared or virtual disk's rate moves from second to second).
  bool disk_wrap = false;
  bool staging_sweep = true;                // also time staged reads of 4/8/16 MiB chunks (io_uring, O_DIRECT)
  std::vector<io::IoPath> io_paths = {io::IoPath::kUring, io::IoPath::kPread, io::IoPath::kBuffered};
  bool compute = true;
  std::vector<GgmlType> types = {GgmlType::F32, GgmlType::F16, GgmlType::BF16,
                                 GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1};
  int64_t matmul_n_out = 8192;   // weight rows
  int64_t matmul_n_in = 4096;    // weight columns (multiple of 32)
  int prefill_tokens = 0;        // 0: 32 on the host backend, 512 on cuda
  // Host site: RAM bandwidth and CPU matmul rates with device.host_threads
  // threads (0: all cores), measured on a host device of its own.
  bool host = true;
  std::vector<GgmlType> host_types = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                                      GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  uint64_t host_decode_bytes = 256ull << 20;  // decode matrix per type: about this many weight bytes
  int64_t host_n_in = 4096;                   // weight columns of both shapes (multiple of 256)
  int64_t host_prefill_n_out = 4096;          // prefill matrix rows
  int host_prefill_tokens = 64;
  uint64_t ram_bytes = 1ull << 30;            // RAM read buffer (at most a quarter of free memory)
  std::function<void(const std::string&)> progress;  // one line per finished measurement
};

struct H2dPoint {
  std::string memory;   // "pinned" or "pageable"
  uint64_t chunk_bytes = 0;
  uint64_t bytes = 0;   // copied in total
  double seconds = 0;
  double gbps = 0;
};

struct DiskPoint {
  std::string path;         // "uring", "pread", "buffered"
  std::string description;  // the reader's description
  bool direct = false;
  uint64_t bytes = 0;
  double seconds = 0;
  double gbps = 0;
  double cached_before = -1;  // fraction of the region in the page cache before reading (-1: unknown)
  bool cache_dropped = false; // posix_fadvise(DONTNEED) succeeded
  std::string error;          // non-empty: this path could not be measured
};

struct ComputePoint {
  std::string type;         // "Q8_0"
  std::string shape;        // "decode" or "prefill"
  int64_t n_out = 0, n_in = 0, n_tokens = 0;
  uint64_t weight_bytes = 0;
  double ms = 0;            // per matmul
  double weight_gbps = 0;   // weight bytes / time
  double gflops = 0;
  double gmacs() const { return gflops / 2; }  // 1e9 multiply-adds per second
};

// The host site's figures (probe_host): what a layer computed on the CPU from
// RAM costs.
struct HostFigures {
  std::string cpu;             // /proc/cpuinfo "model name" ("" when unknown)
  int threads = 0;             // compute threads used for every figure below
  uint64_t ram_read_bytes = 0; // size of the buffer read
  double ram_read_gbps = 0;    // best multi-threaded read rate
  std::vector<ComputePoint> compute;  // fast path, per type: "decode" and "prefill"
};

struct BoxProfile {
  std::string backend, device;
  uint64_t total_memory_bytes = 0, free_memory_bytes = 0;
  int copy_engines = 0;
  double sim_link_gbps = 0;
  std::vector<H2dPoint> h2d;
  double link_gbps = 0;           // best pinned H2D rate
  double pageable_link_gbps = 0;  // best pageable H2D rate
  std::string disk_file;
  uint64_t disk_file_bytes = 0;
  bool disk_scratch = false;      // the file was a scratch file written by the probe
  std::vector<DiskPoint> disk;
  double disk_gbps = 0;           // best O_DIRECT rate (page-cache independent); else best rate
  // Staged path tuning: io_uring O_DIRECT reads of one chunk each, 16 in
  // flight, per chunk size; the fastest (0: not measured).
  uint64_t staging_chunk_bytes = 0;
  std::vector<std::pair<uint64_t, double>> staging_gbps_by_chunk;  // (chunk bytes, GB/s)
  std::vector<ComputePoint> compute;
  std::optional<HostFigures> host;  // measured when ProbeOptions::host
};

Result<BoxProfile> probe_box(const ProbeOptions& options);

// This machine's CPU model as /proc/cpuinfo names it ("" when unknown).
std::string host_cpu_name();

// {"probe_version": 2, "box": {...}, "link_gbps", "pageable_link_gbps",
//  "disk_gbps", "disk_gbps_by_path": {"uring": x, ...}, "h2d": [...],
//  "disk": {"file", "file_bytes", "scratch", "points": [...]}, "compute": [...],
//  "host": {"cpu", "threads", "ram_read_gbps", "ram_read_bytes", "compute": [...]}}
// (docs/BOX_PROFILE.md; version 1 files have no "host").
nlohmann::json to_json(const BoxProfile& profile);
std::string format_probe_table(const BoxProfile& profile);

// The planner's prior from a probe JSON file: link_gbps, and disk_gbps of
// `io_path` when the file has it (else the top-level disk_gbps). Errors name
// the file: NotFound/IOError when unreadable, Corruption when not a probe
// result or a rate is not a positive number.
struct BoxPrior {
  double link_gbps = 0;
  double disk_gbps = 0;
  uint64_t staging_chunk_bytes = 0;  // the probe's best staged read size (0: not in the file)
  std::string source;  // "box file <path>"
};
Result<BoxPrior> load_box_prior(const std::string& path, io::IoPath io_path = io::IoPath::kAuto);
Result<BoxPrior> box_prior_from_json(const nlohmann::json& doc, const std::string& source,
                                     io::IoPath io_path = io::IoPath::kAuto);

}  // namespace layerstream::planning

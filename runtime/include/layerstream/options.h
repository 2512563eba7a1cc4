// Options of the public API as typed values: every choice is an enum, with
// its name (for flags, logs and JSON) and a parser that says what it accepts.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "layerstream/status.h"

namespace layerstream {

// Where layers compute: kAuto picks cuda when a device is present, else host.
enum class Backend { kAuto, kHost, kCuda };
// How disk-tier layers are read: kAuto = io_uring O_DIRECT when available,
// else pread O_DIRECT, else buffered reads.
enum class IoPath { kAuto, kUring, kPread, kBuffered };
// Element type of the KV cache.
enum class KvType { kF32, kF16 };
// How layers are placed:
//   kResident: every layer resident (OutOfBudget when they do not fit);
//   kSerial:   one window slot, load then compute (the baseline);
//   kOverlap:  a fixed window of two slots, first layers resident;
//   kPlanned:  the planner, from measured costs, re-planning on drift; it
//              also chooses where each block computes (host costs measured,
//              or predicted before that: ModelOptions::host_compute_factor):
//              on the device (resident or streamed to
//              it), on the host from RAM (only activations cross), or split
//              by output rows between the two (the device half streamed, the
//              host half from RAM, in the proportion that makes both finish
//              together).
//   kHost:     every block that is not resident computes on the host from
//              RAM (or the file); only activations cross the link.
enum class Strategy { kResident, kSerial, kOverlap, kPlanned, kHost };
// How disk reads reach device memory:
//   kAuto:   straight into device memory when the CPU can address it (host backend);
//   kAlways: the host backend's device memory is reached only by copies, and disk
//            reads go through pinned staging buffers (the path every GPU takes).
enum class Staging { kAuto, kAlways };

// "auto", "host", "cuda" / "auto", "uring", "pread", "buffered" / "f32",
// "f16" / "resident", "serial", "overlap", "planned", "host".
std::string_view name_of(Backend value);
std::string_view name_of(IoPath value);
std::string_view name_of(KvType value);
std::string_view name_of(Strategy value);
std::string_view name_of(Staging value);  // "auto", "always"
// The inverse of name_of; InvalidArgument listing the choices otherwise.
Result<Backend> backend_from_name(std::string_view name);
Result<IoPath> io_path_from_name(std::string_view name);
Result<KvType> kv_type_from_name(std::string_view name);
Result<Strategy> strategy_from_name(std::string_view name);
Result<Staging> staging_from_name(std::string_view name);

// Load progress: the fraction of the resident and RAM-tier bytes loaded so
// far, in [0, 1]. Return false to cancel: Model::open returns Cancelled.
// Called on the thread that calls Model::open.
using LoadProgress = std::function<bool(float fraction)>;

// What a Model is opened with: budgets, backend, and the KV cache pool that
// every Context of the model draws its sequences from.
struct ModelOptions {
  // Device bytes for layers, KV cache and activations (0 = cuda: 90% of free
  // memory; host: what the whole model needs, capped at 90% of free RAM).
  uint64_t vram_budget = 0;
  uint64_t ram_budget = 0;         // pinned host bytes for RAM-tier layers (0 = none: stream from disk)
  Backend backend = Backend::kAuto;
  double sim_link_gbps = 0;        // host backend: throttle H2D copies (GB/s; 0 = off)
  int host_threads = 0;            // host backend compute threads (0 = all)
  bool exact = false;              // host backend: f32-activation matmuls (slower; default: int8 activations)
  IoPath io = IoPath::kAuto;
  int context = 0;                 // positions per sequence (0 = min(model context, 2048))
  int sequences = 1;               // KV sequences of all contexts together (the pool)
  int prefill_chunk = 256;         // max tokens of one pass
  KvType kv_type = KvType::kF32;
  Strategy strategy = Strategy::kPlanned;
  // Hybrid execution: overrides a block's host compute time before it is
  // measured, as a multiple of its device time. 0 = predicted: the device
  // time on the host backend (both sites run the same CPU kernels), unknown
  // on a GPU until measured (kPlanned keeps such blocks on the device while
  // a device placement fits); kHost uses max(1, this).
  double host_compute_factor = 0;
  Staging staging = Staging::kAuto;
  bool trace = false;              // record a trace (Context::write_trace)
  LoadProgress progress;           // optional
};

// What a Context takes from its model.
// Asked before every pass of a decode() or generate() (a long prompt is cut
// into passes of ModelOptions::prefill_chunk tokens; generation runs a pass
// per token). Return true to stop: the call returns Cancelled and the
// tokens of the interrupted decode() are not kept (positions as before the
// call). Called on the thread that decodes; it must not call the context.
using AbortCallback = std::function<bool()>;

struct ContextOptions {
  int sequences = 1;  // KV sequences taken from the model's pool (ModelOptions::sequences)
  AbortCallback abort_callback;  // optional
};

}  // namespace layerstream

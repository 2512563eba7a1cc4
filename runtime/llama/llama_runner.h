// LlamaRunner: a Llama-family model (llama_model.h) run on the streaming
// scheduler. Scheduler layers: block 0..n-1, head (output_norm + output; with
// a tied output the head is token_embd's span, the only copy of those bytes,
// and output_norm is kept in the reserved region). Each is one scheduler
// layer over its file span; the compute callback finds each tensor at
// run.data + (tensor offset - span start). The token embedding is not a
// layer: each pass gathers its tokens' rows on the host (from the tied head's
// RAM copy or host-readable resident region, else from the file) and sends
// them with the tokens; the device embeds from those rows.
//
// Reserved region (carved first in the arena): per sequence slot a KV cache
// [layer][pos][n_kv_head][head_dim] of kv_type for K and V, positions
// 0..n_ctx-1 (a Model lends these slots to its contexts); activations for
// max_pass_tokens() tokens; head rows and logits for max_logits_rows()
// rows; tokens/positions; the pass's embedding rows; matmul scratch.
//
// Tokens go through one path, decode_tokens(): a batch of (token, position,
// sequence, wants logits), cut into passes of at most max_pass_tokens()
// tokens, each pass one list of segments (one per sequence: its tokens
// appended at its current position). The head computes the logits of every
// token that asks, in groups of max_logits_rows() rows, into the caller's
// memory.
//
// Architectures: one block forward pass; what gemma3 / qwen3 / Llama 3.1
// change (QK-norm, post-norms, GeGLU, embedding scale, sliding-window layers
// with their own RoPE base, the file's attention scale, RoPE frequency
// factors kept in the reserve) comes from the model's ArchTraits and hparams.
// With logits_all the head's buffers hold a whole pass of rows, so every
// token's logits of a pass come from one head product (perplexity).
//
// Thread safety: one thread uses a runner. The Device must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/math/ggml_type.h"
#include "layerstream/options.h"
#include "layerstream/status.h"
#include "runtime/device/device.h"
#include "runtime/model/llama_model.h"
#include "runtime/scheduler/executor.h"

namespace layerstream::llama {

// How layers are placed: the public Strategy (layerstream/options.h: what
// each one does, its names). What each means to the scheduler (executor
// options, site policy, minimum budget) is decided in one place,
// runner_strategy.h's strategy_placement().
using Strategy = ::layerstream::Strategy;

// "resident", "serial", "overlap", "planned", "host"; InvalidArgument naming
// the choices on junk (the public names: name_of, strategy_from_name).
inline std::string_view strategy_name(Strategy s) { return name_of(s); }
inline Result<Strategy> parse_strategy(std::string_view name) { return strategy_from_name(name); }

struct RunnerOptions {
  uint64_t vram_budget = 0;    // arena bytes (KV + activations + layers); 0 = device free memory
  uint64_t ram_budget = 0;     // pinned RAM for RAM-tier layers and staging
  Strategy strategy = Strategy::kPlanned;
  int overlap_slots = 2;       // kOverlap window slots
  int n_ctx = 0;               // positions per sequence; 0 = min(model context, 2048)
  int n_seq = 1;               // independent sequences (KV caches), decoded together
  int prefill_chunk = 256;     // max tokens of one prefill pass
  GgmlType kv_type = GgmlType::F32;  // F32 or F16
  double link_gbps = 0;        // 0 = probe (see ExecutorOptions)
  double disk_gbps = 0;
  io::ReaderOptions reader;
  // Staged disk path (devices that are not host-addressable): bytes per
  // staging buffer (one read each) and buffer count (reads in flight); 0 =
  // the executor's defaults (4 MiB, 24).
  uint64_t staging_buffer_bytes = 0;
  unsigned staging_buffers = 0;
  bool trace = true;
  int host_threads = 0;        // host backend: compute threads of the kernels' pool (0 = all cores)
  bool exact = false;          // host backend: f32-activation matmuls (KernelsOptions::exact)
  // Per model layer (LlamaModel::layers, embedding first; empty = none),
  // overrides the strategy. The embedding's entry is ignored (never streamed).
  std::vector<std::optional<sched::Tier>> pins;
  std::optional<sched::Plan> plan;               // explicit plan (kPlanned only)
  // Resident / RAM-tier load progress (ExecutorOptions::load_progress).
  std::function<bool(uint64_t loaded, uint64_t total)> load_progress;
  // The head's buffers hold max_pass_tokens() rows, not n_seq: a pass whose
  // tokens all ask for logits (perplexity) is one head product. Costs
  // max_pass_tokens() x n_vocab floats of reserve, so keep prefill_chunk
  // small with big vocabularies.
  bool logits_all = false;
  // The `uvm` bench strategy (runtime/bench/uvm_runner.h): the weights live
  // outside the executor, in one allocation the device reads directly
  // (managed memory holding the whole file; base = file byte 0). The executor
  // then holds only a small resident placeholder per layer; compute reads each
  // tensor at base + its file offset, and before_layer (may be empty) is
  // called with the executor layer index and the compute stream before that
  // layer's work is enqueued (prefetch hints, waits).
  struct ExternalWeights {
    const uint8_t* base = nullptr;
    std::function<Status(int layer, Stream& compute)> before_layer;
  };
  std::optional<ExternalWeights> external_weights;
  // Hybrid execution: overrides a block's host compute time before it is
  // measured, as a multiple of its device estimate (ModelOptions::
  // host_compute_factor). 0 = predicted (sched::host_factor_before_measurement).
  // kPlanned chooses sites either way; kHost uses max(1, this).
  double host_compute_factor = 0;
  // Called for each group of a block's matmuls that share an input (Q/K/V,
  // O, gate/up, down) with their weights and that input x [n_tokens][n_in],
  // in stream order before the matmuls run (`layerstream imatrix` sums its
  // squares). x must be readable on the host: the host backend, or blocks on
  // the host site; a block elsewhere fails its pass with Unsupported. Empty:
  // never called, nothing done.
  std::function<Status(std::span<const GgufTensorInfo* const> weights, const float* x, int n_tokens)> matmul_inputs;
};

// The one place where a strategy becomes executor options. `reserved_bytes`
// is the runner's reserve (KV + activations); `layers` the executor's layers
// (kOverlap computes its fixed first-fit plan from them); `device_info`
// decides whether disk reads go straight into slots.
Result<sched::ExecutorOptions> executor_options_for(const RunnerOptions& options,
                                                    const std::vector<sched::LayerSpec>& layers,
                                                    const DeviceInfo& device_info, uint64_t reserved_bytes);

// Bytes the reserved region needs for these options (KV + activations).
struct ReserveSize {
  uint64_t kv_bytes = 0;
  uint64_t activation_bytes = 0;
  uint64_t total() const { return kv_bytes + activation_bytes; }
};

// One token of a decode_tokens() batch: appended to sequence slot `seq` at
// position `pos`; `logits`: the caller wants its logits row.
struct PassToken {
  int32_t token = 0;
  int32_t pos = 0;
  int32_t seq = 0;
  bool logits = false;
};

// What a runner with given options needs, from the file alone (no device,
// nothing loaded): for `layerstream plan` and Model::plan.
struct RunnerFootprint {
  int n_ctx = 0, n_seq = 0, max_pass_tokens = 0;
  ReserveSize reserve;
  std::vector<sched::LayerSpec> layers;  // the executor's layers (compute is a no-op)
  struct Matmul {
    GgmlType type = GgmlType::F32;
    int64_t n_out = 0, n_in = 0;
    uint64_t bytes = 0;
  };
  std::vector<std::vector<Matmul>> matmuls;  // per layer: the weight matrices it multiplies
  // Per layer, its mixture of experts (count 0: none): one expert's matrices
  // (its gate, up and down slices). The layer's `matmuls` end with them
  // (one.size() entries), each `used` slices wide, as one token runs them.
  struct Experts {
    uint32_t count = 0, used = 0;
    std::vector<Matmul> one;
    uint64_t bytes() const;  // one expert's bytes
  };
  std::vector<Experts> experts;
  int head_layer = -1;  // index in `layers` of the head (never on the host site); -1: none
  // The smallest budget create() accepts: the reserve plus the least the
  // strategy's placement needs (the planner: usually two window slots).
  uint64_t min_vram_budget = 0;
};

class LlamaRunner {
 public:
  // Opens `path`, validates the Llama view, sizes the reserve and creates the
  // executor. Errors: the model layer's (with the path), InvalidArgument for
  // options, OutOfBudget "budget ... cannot hold the KV cache and activations
  // (Y) plus one window (X)" naming the minimum budget and what fits at this
  // one (a shorter context, an f16 KV cache), from the executor otherwise.
  static Result<std::unique_ptr<LlamaRunner>> create(Device& device, const std::string& path,
                                                     RunnerOptions options);
  // The same from `file`, `path` already parsed by the caller (Model::open
  // reads the metadata and tokenizer from it first): the file is parsed once.
  static Result<std::unique_ptr<LlamaRunner>> create(Device& device, const std::string& path, GgufFile file,
                                                     RunnerOptions options);
  // The footprint create() would work from for these options on `backend`.
  static Result<RunnerFootprint> footprint(const std::string& path, const RunnerOptions& options,
                                           BackendKind backend);
  // The same from a parsed file (its path() names the layers' file; a shape
  // file of model_shape.h works: nothing is read).
  static Result<RunnerFootprint> footprint(const GgufFile& file, const RunnerOptions& options, BackendKind backend);
  ~LlamaRunner();
  LlamaRunner(const LlamaRunner&) = delete;
  LlamaRunner& operator=(const LlamaRunner&) = delete;

  // Decodes a batch in as few passes as max_pass_tokens() allows (the tokens
  // of a sequence stay in order; a sequence's tokens must continue it:
  // positions position(seq), position(seq)+1, ...). The logits of the k-th
  // token with logits = true go to logits_out + k * n_vocab (host memory of
  // the caller, written before this returns). InvalidArgument (naming the
  // token) on a bad sequence, position or id, before any pass runs.
  // `abort` (optional) is asked before each pass; when it says true the
  // passes already run are undone (every sequence back at its position
  // before the call) and the result is Cancelled.
  Status decode_tokens(std::span<const PassToken> tokens, float* logits_out,
                       const std::function<bool()>& abort = nullptr);
  // Sequence slot dst := the KV cache of src (its position(src) positions).
  Status copy_sequence(int src, int dst);
  // Forgets positions >= n_positions of `seq` (the KV cache is positional:
  // only a suffix can be removed).
  Status truncate(int seq, int n_positions);

  // Errors: bad arguments from a caller (a sequence, a token, a position)
  // are Status InvalidArgument; position() takes a sequence the caller
  // already holds (0 <= seq < n_seq()) and checks it with LS_CHECK.

  // Sequence position (tokens in its KV cache); reset forgets the tokens
  // (InvalidArgument for a sequence outside [0, n_seq)).
  int position(int seq) const;
  Status reset(int seq);
  void reset_all();

  // Benchmark helpers, through decode_tokens: one prefill pass of n_tokens
  // (synthetic ids; the last one's logits) on sequence 0 from position 0;
  // one decode pass over sequences 0..n_seqs-1 (each at its current
  // position, reset when full; every token's logits).
  Status bench_prefill(int n_tokens);
  // at_pos >= 0: every sequence decodes at that position (InvalidArgument
  // when it is not below n_ctx); -1: each sequence's next position.
  Status bench_decode(int n_seqs, int at_pos = -1);

  const LlamaModel& model() const;
  const RunnerOptions& options() const;
  int n_ctx() const;
  int n_seq() const;
  int max_pass_tokens() const;
  // Logits rows the head computes in one product (n_seq; with logits_all at
  // least max_pass_tokens()).
  int max_logits_rows() const;
  ReserveSize reserve() const;
  sched::Executor& executor();
  const sched::Plan& plan() const;
  const sched::PassSummary& last_summary() const;
  sched::TraceRecorder& trace();
  // Model file bytes that one pass reads/copies (sum of streamed layers' bytes).
  uint64_t streamed_bytes_per_pass() const;

  struct Impl;

 private:
  explicit LlamaRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace layerstream::llama

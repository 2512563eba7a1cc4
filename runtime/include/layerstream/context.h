// Context: one conversation state on a Model: a KV cache of
// ContextOptions::sequences sequences that persists between calls, so a
// second generate() or decode() continues where the last one stopped and
// runs only the new tokens.
//
// Thread safety: one thread uses a Context at a time; different contexts of
// one model may be used from different threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "layerstream/batch.h"
#include "layerstream/sampler.h"
#include "layerstream/speculative.h"
#include "layerstream/status.h"
#include "layerstream/structured_output.h"

namespace layerstream {

class Model;

// Where generate() puts its prompt (GenerateOptions::prompt_start).
enum class PromptStart {
  // After what each sequence holds: the conversation goes on, and the prompt
  // holds only what is new (the default).
  kContinue,
  // At position 0: the prompt is each sequence's whole text. A sequence keeps
  // the KV of the longest prefix of the prompt it already holds (what earlier
  // calls decoded: their prompts and answers, up to the last sampled token),
  // forgets what follows, and only the rest of the prompt is prefilled, as
  // llama-cpp-python's Llama reuses its input_ids. The prompt's last token is
  // always decoded (its logits start the generation). Stats::cached_tokens
  // says how many were kept. The output is that of a fresh context (greedy
  // and seeded alike) where the kernels are batch-invariant: on the host
  // backend for quantised weights on the default (int8) path; elsewhere a
  // near-tied greedy token can differ (docs/ARCHITECTURE.md, "Prefix reuse").
  kReusePrefix,
  // At position 0, nothing kept: every sequence is cleared and the whole
  // prompt prefilled (the opt-out from kReusePrefix).
  kFresh,
};

struct GenerateOptions {
  int max_tokens = 32;        // per sequence
  SamplingOptions sampling;   // sequence i samples with seed sampling.seed + i
  bool stop_at_eog = true;    // stop a sequence at an end-of-generation token
  bool keep_logits = false;   // GenerateResult::logits (sequence 0)
  // Text stops: a sequence ends where one of these first appears in its
  // text; the match and what follows are not returned (nor streamed: text
  // that may begin a stop is held back until it cannot). Non-empty strings.
  std::vector<std::string> stop;
  // >= 0: GenerateResult::logprobs with this many top alternatives per
  // token (0: the sampled token only); -1: none.
  int logprobs = -1;
  // GenerateResult::prompt_logprobs (with `logprobs` alternatives when >= 0):
  // what evaluation harnesses score. Prefills even when max_tokens is 0.
  // With PromptStart::kReusePrefix nothing is reused then (every prompt
  // token's logits are needed).
  bool prompt_logprobs = false;
  PromptStart prompt_start = PromptStart::kContinue;
  StructuredOutput structured;     // constrain the output (none by default)
  SpeculativeOptions speculative;  // a draft source: several tokens per pass (layerstream/speculative.h)
};

// Why a sequence of generate() stopped.
enum class FinishReason {
  kNone,             // max_tokens 0: nothing generated
  kEndOfGeneration,  // an end-of-generation token (stop_at_eog)
  kStopString,       // a GenerateOptions::stop string
  kLength,           // max_tokens tokens
  kContextFull,      // the sequence filled the context
  kCallback,         // the TokenCallback returned false
};
// "none", "eog", "stop", "length", "context_full", "callback".
const char* finish_reason_name(FinishReason reason);

// One generated token. `piece` is the UTF-8 text it completes (may be empty
// while a multibyte character is incomplete).
struct TokenEvent {
  int sequence = 0;
  int32_t token = 0;
  std::string piece;
  std::optional<TokenLogprob> logprob = {};  // GenerateOptions::logprobs >= 0: this token's
};
// Return false to stop generating.
using TokenCallback = std::function<bool(const TokenEvent&)>;

// What one generate() did, measured.
struct Stats {
  std::string backend, device, plan;  // plan: human-readable placement
  int prompt_tokens = 0;              // tokens this call prefilled per sequence (new tokens only)
  int cached_tokens = 0;              // PromptStart::kReusePrefix: prompt tokens of sequence 0 whose KV was kept
  int generated_tokens = 0;           // all sequences
  int batch = 1;
  double prefill_s = 0, decode_s = 0;
  double prefill_tokens_per_s = 0;    // prefilled tokens (all sequences) / prefill_s
  double decode_tokens_per_s = 0;     // generated tokens after the first / decode_s
  double mean_decode_pass_ms = 0;     // measured
  double mean_predicted_pass_ms = 0;  // the planner's simulator
  double mean_lower_bound_ms = 0;     // max(sum compute, streamed bytes / link bw)
  double overlap_efficiency = 0;      // lower bound / measured, mean over decode passes
  uint64_t bytes_streamed_per_pass = 0;
  double bytes_streamed_per_token = 0;  // per generated token (a pass serves `batch` tokens)
  int layers_resident = 0, layers_ram = 0, layers_disk = 0;
  uint64_t model_bytes = 0, vram_budget = 0, ram_budget = 0, kv_bytes = 0;
  uint64_t load_bytes = 0;            // resident + RAM tier bytes the model loaded (once, at open)
  // Disk-tier reads over the decode passes: bytes read / time the disk was
  // busy reading them (GB/s; 0 when no layer came from disk). The rate the
  // plan's disk figure predicts; compare them when a disk-tier prediction misses.
  double disk_gbps = 0;
  int replans = 0;
  SpeculativeStats speculative;  // when GenerateOptions::speculative has a draft
};

// Pass figures summed over the decode() calls since the last
// take_decode_totals() (a server's metrics).
struct DecodeTotals {
  int passes = 0;
  double measured_s = 0;        // wall time of the passes
  double efficiency_sum = 0;    // sum of per-pass overlap efficiency (lower bound / measured)
  uint64_t streamed_bytes = 0;  // bytes streamed to the device over these passes
};

struct GenerateResult {
  std::vector<int32_t> prompt_tokens;           // the tokens this call prefilled (sequence 0)
  std::vector<std::vector<int32_t>> generated;  // per sequence
  std::vector<std::string> text;                // per sequence
  std::vector<float> logits;                    // [positions][vocab] of sequence 0 when keep_logits
  int vocab = 0;
  std::vector<FinishReason> finish;             // per sequence
  std::vector<uint64_t> seeds;                  // per sequence: the sampling seed used (drawn when random)
  // Per sequence, per generated token when GenerateOptions::logprobs >= 0:
  // log-softmax of the raw logits (before any sampling stage).
  std::vector<std::vector<TokenLogprob>> logprobs;
  // GenerateOptions::prompt_logprobs: of prompt_tokens[1..] (the first has
  // no logits before it in this call), sequence 0.
  std::vector<TokenLogprob> prompt_logprobs;
  Stats stats;
};

class Context {
 public:
  ~Context();  // returns its sequences to the model's pool
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int sequences() const;
  int n_context() const;
  // Tokens sequence `seq` holds (its next position). seq in [0, sequences()).
  int position(int seq) const;

  // Runs `batch` (split into passes of at most ModelOptions::prefill_chunk
  // tokens when larger). InvalidArgument naming the token for a bad id,
  // sequence or position, or a full sequence; nothing is decoded then.
  Status decode(const Batch& batch);
  // The logits of token `i` of the last decode() (n_vocab floats); empty when
  // that token did not ask for logits or that decode failed. i in [0, tokens
  // of the last decode()).
  std::span<const float> logits(int i) const;
  // Tokens of the last decode(): the range logits(i) takes.
  int last_decode_tokens() const;
  // The pass figures of decode() since the last call, then zeroed.
  DecodeTotals take_decode_totals();

  // KV cache edits. clear: forget every token of `seq` (-1: all sequences);
  // copy: dst becomes a copy of src (a shared prefix, decoded once);
  // remove: forget positions >= from (the cache is positional: a suffix).
  Status clear(int seq = -1);
  Status copy_sequence(int src, int dst);
  Status remove(int seq, int from);

  // Generates from `prompt` appended to every sequence: the first call
  // prefills it (with BOS; one sequence prefilled, the others copied), later
  // calls continue the conversation and prefill only the tokens that are
  // new (the last sampled token of the previous call, then the prompt).
  // GenerateOptions::prompt_start kReusePrefix / kFresh: the prompt is the
  // whole sequence instead (a text prompt gets BOS); with kReusePrefix each
  // sequence prefills only what follows the prefix it already holds.
  // InvalidArgument when the prompt does not fit the context, or for
  // sampling values validate_sampling() refuses (naming the field); a
  // sequence that fills the context ends with FinishReason::kContextFull.
  Result<GenerateResult> generate(const std::string& prompt, const GenerateOptions& options,
                                  const TokenCallback& on_token = nullptr);
  Result<GenerateResult> generate(const std::vector<int32_t>& prompt_tokens, const GenerateOptions& options,
                                  const TokenCallback& on_token = nullptr);
  // Chrome trace-event JSON of the model's passes so far (needs ModelOptions::trace).
  Status write_trace(const std::string& path) const;

  struct Impl;  // the library's; apps get a Context from Model::create_context()

 private:
  friend class Model;
  explicit Context(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace layerstream

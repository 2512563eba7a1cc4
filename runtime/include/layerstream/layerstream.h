// The layerstream library API: run a Llama-family GGUF model that may be
// larger than the GPU (or RAM) budget, streaming layers from pinned RAM and
// disk while earlier layers compute.
//
//   auto model = layerstream::Model::open("model.gguf", {.vram_budget = 1 << 30});
//   auto session = (*model)->create_session();
//   auto result = (*session)->generate("Once upon a time", {.max_tokens = 32},
//       [](const layerstream::TokenEvent& t) { std::fputs(t.piece.c_str(), stdout); return true; });
//
// Ownership: a Session keeps its Model alive (shared). Thread safety: one
// thread uses a Session at a time; different Sessions are independent.
// Errors are Status values (status.h); nothing here prints to stdout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {

enum class Backend { kAuto, kHost, kCuda };

struct ModelOptions {
  // Device bytes for layers, KV cache and activations (0 = cuda: 90% of free
  // memory; host: what the whole model needs, capped at 90% of free RAM).
  uint64_t vram_budget = 0;
  uint64_t ram_budget = 0;       // pinned host bytes for RAM-tier layers (0 = none: stream from disk)
  Backend backend = Backend::kAuto;
  double sim_link_gbps = 0;      // host backend: throttle H2D copies (0 = off)
  std::string io = "auto";       // disk reads: auto, uring, pread, buffered
  int context = 0;               // positions per sequence (0 = min(model context, 2048))
  int batch = 1;                 // sequences decoded together
  int prefill_chunk = 256;       // max prompt tokens per pass
  std::string kv_type = "f32";   // KV cache: f32 or f16
  std::string strategy = "planned";  // resident, serial, overlap, planned
  bool trace = false;            // record a trace (Session::write_trace)
  int host_threads = 0;          // host backend compute threads (0 = all)
  bool exact = false;            // host backend: f32-activation matmuls (slower; default: int8 activations)
};

// What a Model file is, from its metadata.
struct ModelInfo {
  std::string path, architecture;
  uint64_t file_bytes = 0;
  int layers = 0, embedding = 0, heads = 0, kv_heads = 0, vocab = 0, context = 0;
};

struct GenerateOptions {
  int max_tokens = 32;       // per sequence
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: all
  float top_p = 0.95f;       // >= 1: all
  uint64_t seed = 0;         // sequence i samples with seed + i
  bool stop_at_eog = true;   // stop a sequence at an end-of-generation token
  bool keep_logits = false;  // GenerateResult::logits (sequence 0)
};

// One generated token. `piece` is the UTF-8 text it completes (may be empty
// while a multibyte character is incomplete).
struct TokenEvent {
  int sequence = 0;
  int32_t token = 0;
  std::string piece;
};
// Return false to stop generating.
using TokenCallback = std::function<bool(const TokenEvent&)>;

struct Stats {
  std::string backend, device, plan;  // plan: human-readable placement
  int prompt_tokens = 0;              // per sequence
  int generated_tokens = 0;           // all sequences
  int batch = 1;
  double prefill_s = 0, decode_s = 0;
  double prefill_tokens_per_s = 0;    // prompt tokens (all sequences) / prefill_s
  double decode_tokens_per_s = 0;     // generated tokens after the first / decode_s
  double mean_decode_pass_ms = 0;     // measured
  double mean_predicted_pass_ms = 0;  // the planner's simulator
  double mean_lower_bound_ms = 0;     // max(sum compute, streamed bytes / link bw)
  double overlap_efficiency = 0;      // lower bound / measured, mean over decode passes
  uint64_t bytes_streamed_per_pass = 0;
  double bytes_streamed_per_token = 0;  // per generated token (a pass serves `batch` tokens)
  int layers_resident = 0, layers_ram = 0, layers_disk = 0;
  uint64_t model_bytes = 0, vram_budget = 0, ram_budget = 0, kv_bytes = 0;
  int replans = 0;
};

struct GenerateResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<std::vector<int32_t>> generated;  // per sequence
  std::vector<std::string> text;                // per sequence
  std::vector<float> logits;                    // [positions][vocab] of sequence 0 when keep_logits
  int vocab = 0;
  Stats stats;
};

class Session;

class Model : public std::enable_shared_from_this<Model> {
 public:
  // Parses and validates the file and its tokenizer. Errors: IOError,
  // Corruption, Unsupported (architecture, tensor type), NotFound (no tokenizer).
  static Result<std::shared_ptr<Model>> open(const std::string& path, const ModelOptions& options = {});
  ~Model();

  const ModelInfo& info() const;
  const ModelOptions& options() const;
  std::vector<int32_t> tokenize(const std::string& text, bool add_bos = true) const;
  std::string detokenize(const std::vector<int32_t>& tokens) const;

  // Opens the device and places the layers within the budgets. OutOfBudget
  // (bytes needed and available) when one window plus the KV cache does not fit.
  Result<std::unique_ptr<Session>> create_session();

  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

class Session {
 public:
  ~Session();
  // Encodes `prompt` (with BOS) and generates; each sequence of the batch gets
  // the same prompt and its own seed. InvalidArgument when the prompt plus
  // max_tokens is longer than the context, or the prompt is empty.
  Result<GenerateResult> generate(const std::string& prompt, const GenerateOptions& options,
                                  const TokenCallback& on_token = nullptr);
  Result<GenerateResult> generate(const std::vector<int32_t>& prompt_tokens, const GenerateOptions& options,
                                  const TokenCallback& on_token = nullptr);
  // Chrome trace-event JSON of the passes run so far (needs ModelOptions::trace).
  Status write_trace(const std::string& path) const;

  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Writes the example model (a Llama GGUF with pseudo-random weights and a
// tokenizer) to `path`. target_bytes 0: a tiny 4-layer model (~1 MiB).
struct ExampleModelOptions {
  uint64_t target_bytes = 0;
  std::string dtype = "f16";  // f32, f16, bf16, q8_0, q4_0, q4_1
  uint64_t seed = 1;
};
Status make_example_model(const std::string& path, const ExampleModelOptions& options = {});

// "1.2 GiB", as units.h does; and a one-paragraph summary of Stats for people.
std::string format_stats(const Stats& stats);

}  // namespace layerstream

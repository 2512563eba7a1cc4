// Model: one GGUF file opened on a device within memory budgets. It owns the
// weights and their placement: resident layers are loaded once, when the
// model opens, and every Context of the model shares them (and the window
// that streams the rest). It also owns the KV cache pool its contexts take
// sequences from (ModelOptions::context x ModelOptions::sequences).
//
// Thread safety: a Model may be used from several threads; contexts on
// different threads decode concurrently, their passes run one at a time on
// the model's executor (a pass is one walk over every layer).
// Ownership: contexts keep their model alive (shared_ptr).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layerstream/memory_plan.h"
#include "layerstream/options.h"
#include "layerstream/status.h"
#include "layerstream/structured_output.h"

namespace layerstream {

class Context;

// What a model file is, from its metadata.
struct ModelInfo {
  std::string path, architecture;
  uint64_t file_bytes = 0;
  int layers = 0, embedding = 0, heads = 0, kv_heads = 0, vocab = 0, context = 0;
};

class Model : public std::enable_shared_from_this<Model> {
 public:
  // Parses the file and its tokenizer, opens the device, places the layers
  // within the budgets and loads the resident and RAM tiers (reporting to
  // options.progress). Errors: IOError, Corruption, Unsupported (architecture,
  // tensor type), NotFound (no tokenizer), InvalidArgument (options),
  // OutOfBudget (bytes needed, available, and what would fit), Cancelled.
  static Result<std::shared_ptr<Model>> open(const std::string& path, const ModelOptions& options = {});
  // Without loading anything: each part's bytes, the smallest budget that
  // runs, the all-resident budget and, per budget, the placement and the
  // predicted decode and prefill tokens/s (from options.box, or figures
  // measured now). Errors: as open's for the file; the box file's.
  static Result<MemoryPlan> plan(const std::string& path, const PlanOptions& options = {});
  ~Model();

  const ModelInfo& info() const;
  const ModelOptions& options() const;
  // Text to token ids as the file's tokenizer says: add_special adds BOS/EOS
  // only where tokenizer.ggml.add_bos_token / add_eos_token ask;
  // parse_special turns special tokens written in the text (<|im_start|>)
  // into their ids (false: they are tokenized as plain text).
  std::vector<int32_t> tokenize(const std::string& text, bool add_special = true, bool parse_special = true) const;
  std::string detokenize(const std::vector<int32_t>& tokens) const;
  bool is_end_of_generation(int32_t token) const;
  // The file's special tokens (tokenizer.ggml.bos_token_id, eos_token_id,
  // eot_token_id); -1 where the file names none.
  int32_t token_bos() const;
  int32_t token_eos() const;
  int32_t token_eot() const;
  // The file's Jinja chat template (tokenizer.chat_template); empty where
  // the file has none.
  const std::string& chat_template() const;
  int n_vocab() const;
  int n_context() const;  // positions per sequence
  // The file's metadata as llama.cpp's llama_model_meta_val_str gives it:
  // every key whose value is not an array, in file order, as text.
  const std::vector<std::pair<std::string, std::string>>& metadata() const;

  // A context with options.sequences sequences from the pool. OutOfBudget
  // when the pool has fewer free (names the pool and what is in use).
  Result<std::unique_ptr<Context>> create_context(const ContextOptions& options = {});
  int free_sequences() const;
  // Bytes loaded into the resident and RAM tiers since open (contexts add none).
  uint64_t load_bytes() const;
  // A constraint for one sequence's output (layerstream/structured_output.h),
  // compiled for this vocabulary on first use of its text (later calls with
  // the same text reuse it). Unsupported in a build without the grammar
  // engine (LAYERSTREAM_STRUCTURED_OUTPUT); InvalidArgument naming the kind
  // (json_schema, regex, grammar) and the engine's reason for bad text.
  Result<std::unique_ptr<TokenConstraint>> constrain(const StructuredOutput& structured) const;
  // The placement, for people ("12 resident [...], 4 disk; 2 slots ...").
  std::string placement() const;

  struct Impl;  // the library's; apps get a Model from open()

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace layerstream

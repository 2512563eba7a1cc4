// Model::Impl, shared by the files that implement Model and Context.
//
// What is shared and how it is guarded:
//  - tokenizer, info, options: immutable after open;
//  - runner (and its executor, device streams, sequence positions, trace):
//    every use holds pass_mu, so passes of different contexts run one at a
//    time and each sees the state the previous one left;
//  - the sequence pool (which runner slots a context owns): slot_mu;
//  - the grammar compiler (structured output), made on first use: grammar_mu.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layerstream/model.h"
#include "runtime/core/annotated_mutex.h"
#include "runtime/device/device.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream {

struct Model::Impl {
  std::string path;
  ModelOptions options;
  ModelInfo info;
  std::string chat_template;  // tokenizer.chat_template, empty where absent
  std::vector<std::pair<std::string, std::string>> metadata;  // Model::metadata()
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Device> device;
  int n_ctx = 0, n_seq = 0;  // the runner's, fixed at open

  // Passes of every context, one at a time: the runner, its executor, device
  // streams, sequence positions and trace are used only with pass_mu held.
  mutable Mutex pass_mu;
  std::unique_ptr<llama::LlamaRunner> runner LS_PT_GUARDED_BY(pass_mu);  // destroyed before device
  mutable Mutex slot_mu;
  std::vector<bool> slot_used LS_GUARDED_BY(slot_mu);  // per runner sequence slot

  mutable Mutex grammar_mu;
  // Compiles (and caches) structured-output constraints for this vocabulary;
  // thread-safe once made (grammar_compiler.h).
  std::unique_ptr<grammar::GrammarCompiler> grammar_compiler LS_GUARDED_BY(grammar_mu);

  ~Impl() { runner.reset(); }
  // Takes `n` free runner slots (OutOfBudget naming the pool otherwise).
  Result<std::vector<int>> take_slots(int n) LS_EXCLUDES(slot_mu);
  void give_back(const std::vector<int>& slots) LS_EXCLUDES(slot_mu);
};

// The runner options a Model's options ask for (every option maps; it cannot fail).
llama::RunnerOptions runner_options_for(const ModelOptions& options);
// The device options they ask for.
DeviceOptions device_options_for(const ModelOptions& options);

}  // namespace layerstream

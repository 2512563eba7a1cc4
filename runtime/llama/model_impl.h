// Model::Impl, shared by the files that implement Model and Context.
//
// What is shared and how it is guarded:
//  - tokenizer, info, options: immutable after open;
//  - runner (and its executor, device streams, sequence positions, trace):
//    every use holds pass_mu, so passes of different contexts run one at a
//    time and each sees the state the previous one left;
//  - the sequence pool (which runner slots a context owns): slot_mu.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "layerstream/model.h"
#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream {

struct Model::Impl {
  std::string path;
  ModelOptions options;
  ModelInfo info;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Device> device;
  std::unique_ptr<llama::LlamaRunner> runner;  // destroyed before device (see ~Impl)

  mutable std::mutex pass_mu;  // guards runner
  mutable std::mutex slot_mu;  // guards slot_used
  std::vector<bool> slot_used;  // per runner sequence slot

  ~Impl() { runner.reset(); }
  // Takes `n` free runner slots (OutOfBudget naming the pool otherwise).
  Result<std::vector<int>> take_slots(int n);
  void give_back(const std::vector<int>& slots);
};

// The runner options a Model's options ask for (InvalidArgument on junk).
Result<llama::RunnerOptions> runner_options_for(const ModelOptions& options);
// The device options they ask for.
DeviceOptions device_options_for(Backend backend, double sim_link_gbps, int host_threads);

}  // namespace layerstream

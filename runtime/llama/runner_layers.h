// The executor's layers of a Llama model, built once for both create() and
// footprint(): blocks in order, then the head. The token embedding is not a
// layer (gathered per pass, embedding.cpp); a tied head is the one layer
// holding token_embd's bytes (output_norm then lives in the reserve).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "layerstream/status.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/model/llama_model.h"
#include "runtime/scheduler/layer.h"

namespace layerstream::llama {

struct RunnerLayers {
  std::vector<sched::LayerSpec> specs;  // name, file span, host_ok, the user's pin; no compute
  std::vector<int> block;               // per layer: the block it computes, -1 for the head
  int head = -1;                        // index of the head; -1: none
};

// InvalidArgument when o.pins does not have one entry per model layer.
Result<RunnerLayers> runner_layers(const LlamaModel& m, const std::string& path, const RunnerOptions& o);

}  // namespace layerstream::llama

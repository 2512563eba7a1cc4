// What the CUDA parity tests share: their runner options and an
// all-resident run of a model (its logits over a token script, and the sizes
// a streamed run of the same model is budgeted from).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/status_macros.h"
#include "runtime/llama/llama_runner.h"
#include "tests/common/runner_logits.h"

namespace layerstream::testing {

// 64 positions, the link rate the planner assumes, every layer resident.
inline llama::RunnerOptions gpu_parity_options() {
  llama::RunnerOptions ro;
  ro.n_ctx = 64;
  ro.link_gbps = 20;
  ro.strategy = llama::Strategy::kResident;
  return ro;
}

struct ResidentRun {
  std::vector<std::vector<float>> logits;  // testing::runner_logits
  int n_layers = 0;                         // executor layers (blocks and the head)
  uint64_t largest = 0, reserve = 0;        // largest layer, reserved region (bytes)
};

inline Result<ResidentRun> resident_run(Device& dev, const std::string& path, const llama::RunnerOptions& ro,
                                        const std::vector<int32_t>& prompt, const std::vector<int32_t>& next) {
  LS_ASSIGN_OR_RETURN(std::unique_ptr<llama::LlamaRunner> r, llama::LlamaRunner::create(dev, path, ro));
  ResidentRun out;
  out.logits = runner_logits(*r, prompt, next);
  out.n_layers = static_cast<int>(r->executor().layer_bytes().size());
  for (uint64_t b : r->executor().layer_bytes()) out.largest = std::max(out.largest, b);
  out.reserve = r->reserve().total();
  return out;
}

// The CUDA device backend.
inline Result<std::unique_ptr<Device>> open_cuda_device() {
  DeviceOptions co;
  co.backend = BackendKind::kCuda;
  return open_device(co);
}

}  // namespace layerstream::testing

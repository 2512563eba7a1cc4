// Mixtures of experts on the CUDA backend: a qwen3moe, a mixtral and a
// gpt-oss (MXFP4 experts) example model give, all resident on the GPU, the host backend's logits within the
// two backends' agreement, and streamed from disk through a 2-slot window
// the GPU's resident logits bit for bit. Skips with the reason when no
// device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/llama/llama_runner.h"
#include "runtime/model/example_model.h"
#include "tests/common/gpu.h"
#include "tests/common/runner_logits.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"
#include "tests/common/tiny_runner.h"
#include "tests/gpu/gpu_parity.h"

namespace layerstream {
namespace {

using llama::LlamaRunner;
using llama::RunnerOptions;
using llama::Strategy;

TEST(MoeGpu, ResidentMatchesHostAndStreamedMatchesResident) {
  LS_REQUIRE_CUDA_DEVICE();
  const uint64_t seed = testing::fresh_seed();
  testing::TempDir dir;
  const std::vector<int32_t> prompt = {1, 17, 250, 3, 99, 400, 7, 12, 8, 300, 41}, next = {5, 311, 42};
  for (const std::string arch : {"qwen3moe", "mixtral", "gpt-oss"}) {
    SCOPED_TRACE(arch);
    ExampleModelSpec spec = testing::tiny_llama_spec(GgmlType::Q8_0, seed, 256);
    spec.arch = arch;
    spec.n_expert = 8;
    spec.n_expert_used = 2;
    if (arch == "gpt-oss") spec.expert_dtype = GgmlType::MXFP4;  // with sinks, biases and its window, as it ships
    const std::string path = dir.file(arch + ".gguf");
    LS_ASSERT_OK(testing::write_scratch_model(path, spec));

    RunnerOptions ro = testing::gpu_parity_options();
    auto host = testing::open_host_device(2);
    LS_ASSERT_OK_AND_ASSIGN(const testing::ResidentRun host_run, testing::resident_run(*host, path, ro, prompt, next));
    const auto& want = host_run.logits;
    LS_ASSERT_OK_AND_ASSIGN(auto gpu, testing::open_cuda_device());
    ro.vram_budget = 256ull << 20;
    LS_ASSERT_OK_AND_ASSIGN(const testing::ResidentRun gpu_run, testing::resident_run(*gpu, path, ro, prompt, next));
    const auto& resident = gpu_run.logits;
    double diff = 0, amax = 0;
    for (size_t i = 0; i < want.size(); ++i)
      for (size_t j = 0; j < want[i].size(); ++j) {
        diff = std::max(diff, double(std::abs(resident[i][j] - want[i][j])));
        amax = std::max(amax, double(std::abs(want[i][j])));
      }
    std::printf("[ moe gpu ] %s: max |logit diff| cuda vs host %.3g (max |logit| %.3g)\n", arch.c_str(), diff, amax);
    EXPECT_LE(diff, 1e-2 * (1 + amax));

    RunnerOptions so = ro;
    so.strategy = Strategy::kPlanned;
    so.vram_budget = gpu_run.reserve + 2 * (sched::round_up(gpu_run.largest, 4096) + 8192);
    LS_ASSERT_OK_AND_ASSIGN(auto sr, LlamaRunner::create(*gpu, path, so));
    EXPECT_GT(sr->streamed_bytes_per_pass(), 0u);
    testing::expect_same_logits(testing::runner_logits(*sr, prompt, next), resident, "seed " + std::to_string(seed));
  }
}

}  // namespace
}  // namespace layerstream

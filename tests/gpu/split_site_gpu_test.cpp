// Split sites on the CUDA backend (issue 16): a block whose matmuls' output
// rows are divided between the GPU (rows [0, r) from the streamed part of the
// layer) and the host lane (rows [r, n) with the CPU kernels from the RAM
// copy) gives the logits the host backend computes for the all-resident
// model, within the agreement of the two backends (measured here as the
// CUDA all-resident run's distance from the host run). Skips with the
// reason when no device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/llama/llama_runner.h"
#include "runtime/model/example_model.h"
#include "tests/common/gpu.h"
#include "tests/common/runner_logits.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"
#include "tests/gpu/gpu_parity.h"

namespace layerstream {
namespace {

using llama::LlamaRunner;
using llama::RunnerOptions;
using llama::Strategy;

double max_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, double& amax) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j) {
      d = std::max(d, double(std::abs(a[i][j] - b[i][j])));
      amax = std::max(amax, double(std::abs(b[i][j])));
    }
  return d;
}

TEST(SplitSiteGpu, SplitBlocksMatchHostResident) {
  LS_REQUIRE_CUDA_DEVICE();
  const uint64_t seed = testing::fresh_seed();
  testing::TempDir dir;
  ExampleModelSpec spec = testing::tiny_llama_spec(GgmlType::Q8_0, seed, 256);
  spec.n_layers = 4;
  spec.n_ff = 192;
  const std::string path = dir.file("m.gguf");
  LS_ASSERT_OK(testing::write_scratch_model(path, spec));
  std::vector<int32_t> prompt = {1, 17, 250, 3, 99, 400, 7}, next = {5, 311, 42};

  RunnerOptions ro = testing::gpu_parity_options();
  auto host = testing::open_host_device(2);
  LS_ASSERT_OK_AND_ASSIGN(const testing::ResidentRun host_run, testing::resident_run(*host, path, ro, prompt, next));
  const auto& want = host_run.logits;
  const int n = host_run.n_layers;
  LS_ASSERT_OK_AND_ASSIGN(auto gpu, testing::open_cuda_device());
  ro.vram_budget = 256ull << 20;
  LS_ASSERT_OK_AND_ASSIGN(const testing::ResidentRun gpu_run, testing::resident_run(*gpu, path, ro, prompt, next));
  const auto& gpu_resident = gpu_run.logits;
  double amax = 0;
  const double backends = max_diff(gpu_resident, want, amax);

  sched::Plan p;
  p.tiers.assign(n, sched::Tier::kResident);
  p.sites.assign(n, sched::Site::kDevice);
  p.device_rows.assign(n, 1.0);
  for (int i = 0; i + 1 < n; ++i) {  // every block split, at different fractions; the head resident
    p.tiers[i] = sched::Tier::kRam;
    p.sites[i] = sched::Site::kSplit;
    p.device_rows[i] = 0.25 + 0.5 * i / std::max(1, n - 2);
  }
  p.slots = 2;
  p.prefetch_depth = 1;
  RunnerOptions so = ro;
  so.strategy = Strategy::kPlanned;
  so.ram_budget = 64ull << 20;
  so.plan = p;
  LS_ASSERT_OK_AND_ASSIGN(auto sr, LlamaRunner::create(*gpu, path, so));
  ASSERT_EQ(sr->plan().count_site(sched::Site::kSplit), n - 1) << sched::site_map(sr->plan());
  const auto got = testing::runner_logits(*sr, prompt, next);
  const double split = max_diff(got, want, amax);
  std::printf("[ split gpu ] max |logit diff| vs host resident: cuda resident %.3g, cuda split %.3g (max |logit| %.3g)\n",
              backends, split, amax);
  EXPECT_LE(split, std::max(2 * backends, 1e-2 * (1 + amax)));
  EXPECT_LT(sr->last_summary().streamed_bytes, sr->executor().layer_bytes()[0] * (n - 1));
  // Both halves measured on the GPU (device x->y events, host lane busy time)
  // and normalised to the whole block: what the planner re-plans from.
  const sched::CostModel& cost = sr->executor().cost_model();
  for (int i = 0; i + 1 < n; ++i) {
    EXPECT_TRUE(cost.measured(i, 0) && cost.host_measured(i, 0)) << "split block " << i;
    std::printf("[ split gpu ] block %d at f=%.2f: device %.3f ms, host %.3f ms (whole block, measured)\n", i,
                sr->plan().device_fraction(i), cost.compute_s(i, 0) * 1e3, cost.host_compute_s(i, 0) * 1e3);
  }
}

}  // namespace
}  // namespace layerstream

// Hybrid execution (issue 16) on the host backend: a block computed on the
// host site (CPU kernels on host memory, from its RAM copy or read from the
// file each pass; only activations cross; its KV cache on the host) gives the
// all-resident logits bit for bit — the same CPU kernels run — for random
// placements of sites and tiers, on a host-addressable device and on a
// copies-only one (the cuda stand-in: the host lane never touches device
// memory), through a site change between prefill and decode (the KV cache
// follows the block), and with the `host` and `planned` strategies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/model/example_model.h"
#include "tests/common/runner_logits.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"
#include "tests/common/tiny_runner.h"

namespace layerstream {
namespace {

using llama::LlamaRunner;
using llama::RunnerOptions;
using llama::Strategy;
using sched::Site;
using sched::Tier;

RunnerOptions base_options() { return testing::tiny_runner_options(/*trace=*/true); }

using testing::random_tokens;

std::vector<std::vector<float>> prefill_logits(LlamaRunner& r, const std::vector<int32_t>& prompt) {
  return {testing::decode_last_logits(r, prompt)};
}

void decode_logits(LlamaRunner& r, const std::vector<int32_t>& next, std::vector<std::vector<float>>& out) {
  for (int32_t t : next) out.push_back(testing::decode_last_logits(r, {t}));
}

void expect_same(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                 uint64_t seed) {
  testing::expect_same_logits(got, want, "seed " + std::to_string(seed));
}

// A random placement: each block resident, RAM or disk tier, and (when not
// resident) on the device or the host site; at least one host-site block and
// one device-site block; the head (last layer) stays on the device.
sched::Plan random_plan(std::mt19937_64& rng, int n_layers) {
  sched::Plan p;
  for (;;) {
    p.tiers.assign(n_layers, Tier::kResident);
    p.sites.assign(n_layers, Site::kDevice);
    int host = 0, dev = 0;
    for (int i = 0; i + 1 < n_layers; ++i) {
      p.tiers[i] = static_cast<Tier>(rng() % 3);
      if (p.tiers[i] != Tier::kResident && rng() % 2) p.sites[i] = Site::kHost;
      (p.sites[i] == Site::kHost ? host : dev)++;
    }
    if (host > 0 && dev > 0) break;
  }
  p.slots = 2;
  p.prefetch_depth = 1;
  return p;
}

// A model type, and an architecture (the mixtures of experts: their expert
// tensors are part of the block wherever it runs).
struct HybridCase {
  GgmlType dtype;
  std::string arch = "llama";
  uint32_t n_expert = 0;
};

class HybridSites : public ::testing::TestWithParam<HybridCase> {};

TEST_P(HybridSites, RandomPlacementsBitIdenticalToResident) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  testing::TempDir dir;
  ExampleModelSpec spec = testing::tiny_llama_spec(GetParam().dtype, seed, /*n_ctx=*/256);
  spec.n_layers = 6;
  spec.arch = GetParam().arch;
  spec.n_expert = GetParam().n_expert;
  spec.n_expert_used = GetParam().n_expert ? 2 : 0;
  if (spec.arch == "gpt-oss") spec.expert_dtype = GgmlType::MXFP4;  // as it ships
  const std::string path = dir.file("m.gguf");
  LS_ASSERT_OK(testing::write_scratch_model(path, spec));
  auto dev = testing::open_host_device(2);
  auto staged = testing::open_host_device(2, /*sim_link_gbps=*/0, /*copies_only=*/true);
  ASSERT_TRUE(dev && staged);
  const auto prompt = random_tokens(rng, 9, 512);
  const auto next = random_tokens(rng, 4, 512);

  RunnerOptions ro = base_options();
  ro.strategy = Strategy::kResident;
  LS_ASSERT_OK_AND_ASSIGN(auto resident, LlamaRunner::create(*dev, path, ro));
  auto want = prefill_logits(*resident, prompt);
  decode_logits(*resident, next, want);
  const int n = static_cast<int>(resident->executor().layer_bytes().size());
  // Room for every layer resident plus a 2-slot window: the site flip below
  // may turn a host-site block of an otherwise all-resident placement into a
  // streamed one.
  uint64_t largest = 0;
  const uint64_t vram = testing::any_placement_vram(*resident, &largest);
  const uint64_t small_vram = resident->reserve().total() + 4096 + 3 * largest;  // most layers cannot be resident
  resident.reset();

  for (int trial = 0; trial < 4; ++trial) {
    const bool copies_only = trial % 2 == 1;
    sched::Plan plan = random_plan(rng, n);
    SCOPED_TRACE("placement " + sched::site_map(plan) + (copies_only ? " (copies-only device)" : ""));
    RunnerOptions o = base_options();
    o.strategy = Strategy::kPlanned;
    o.vram_budget = vram;
    o.ram_budget = 64ull << 20;
    o.plan = plan;
    LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(copies_only ? *staged : *dev, path, o));
    ASSERT_EQ(r->plan().count_site(Site::kHost), plan.count_site(Site::kHost));
    auto got = prefill_logits(*r, prompt);
    // A site change between prefill and decode: the KV caches follow.
    sched::Plan flipped = r->plan();
    for (int i = 0; i + 1 < n; ++i)
      if (flipped.tiers[i] != Tier::kResident)
        flipped.sites[i] = flipped.sites[i] == Site::kHost ? Site::kDevice : Site::kHost;
    flipped.slots = 2;  // the flipped plan may stream where the first did not
    flipped.prefetch_depth = 1;
    if (trial >= 2) {
      Status st = r->executor().apply_plan(flipped);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(sched::site_map(r->plan()), sched::site_map(flipped));
    }
    decode_logits(*r, next, got);
    expect_same(got, want, seed);
    // Host-site layers show on the trace's host lane, and nowhere else.
    bool host_lane = false, host_on_device_lane = false;
    for (const auto& e : r->trace().events()) {
      if (e.kind == sched::TraceKind::kHostCompute) host_lane = true;
      if (e.kind == sched::TraceKind::kCompute && r->plan().site(e.layer) == Site::kHost && e.pass > 1)
        host_on_device_lane = true;
    }
    EXPECT_TRUE(host_lane);
    EXPECT_FALSE(host_on_device_lane && trial < 2);
  }

  // The strategies: `host` (every non-resident block on the host) and
  // `planned` choosing sites from the cost model.
  for (Strategy s : {Strategy::kHost, Strategy::kPlanned}) {
    SCOPED_TRACE(std::string(llama::strategy_name(s)));
    RunnerOptions o = base_options();
    o.strategy = s;
    o.vram_budget = small_vram;
    o.ram_budget = 64ull << 20;
    o.host_compute_factor = 1.0;
    LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, o));
    auto got = prefill_logits(*r, prompt);
    decode_logits(*r, next, got);
    expect_same(got, want, seed);
    if (s == Strategy::kHost) EXPECT_GT(r->plan().count_site(Site::kHost), 0) << sched::site_map(r->plan());
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HybridSites,
                         ::testing::Values(HybridCase{GgmlType::F32}, HybridCase{GgmlType::Q8_0},
                                           HybridCase{GgmlType::Q4_0}, HybridCase{GgmlType::F32, "qwen3moe", 8},
                                           HybridCase{GgmlType::Q8_0, "qwen3moe", 8},
                                           HybridCase{GgmlType::Q8_0, "mixtral", 4},
                                           HybridCase{GgmlType::Q8_0, "gpt-oss", 4}),
                         [](const auto& info) {
                           std::string arch = info.param.arch;
                           std::replace(arch.begin(), arch.end(), '-', '_');  // test names: [A-Za-z0-9_]
                           return arch + "_" + ggml_type_name(static_cast<uint32_t>(info.param.dtype));
                         });

}  // namespace
}  // namespace layerstream

namespace layerstream {
namespace {

constexpr int kBlocks = 6;

// A Q8_0 example model of kBlocks blocks, a host device, and runner options
// with a 64 MiB RAM tier.
class HybridBlocks : public ::testing::Test {
 protected:
  void SetUp() override {
    ExampleModelSpec spec = testing::tiny_llama_spec(GgmlType::Q8_0, seed_, /*n_ctx=*/256);
    spec.n_layers = kBlocks;
    LS_ASSERT_OK(testing::write_scratch_model(path_, spec));
    dev_ = testing::open_host_device(2);
    options_.ram_budget = 64ull << 20;
  }
  const uint64_t seed_ = testing::fresh_seed();
  std::mt19937_64 rng_{seed_};
  testing::TempDir dir_;
  const std::string path_ = dir_.file("m.gguf");
  std::unique_ptr<Device> dev_;
  RunnerOptions options_ = base_options();
};

// The `host` strategy needs VRAM only for what stays on the device (the
// head, next to the reserve), not for a window of blocks: it runs at its own
// minimum (`planned`'s too), below the device-only strategies', and one byte
// less fails before anything runs with an error naming the bytes needed and
// what fits.
TEST_F(HybridBlocks, HostStrategyRunsAtItsSmallerMinimum) {
  const std::string& path = path_;
  Device& dev = *dev_;
  RunnerOptions o = options_;
  o.strategy = Strategy::kSerial;  // a device-only strategy: a window of blocks
  LS_ASSERT_OK_AND_ASSIGN(auto serial_fp, LlamaRunner::footprint(path, o, BackendKind::kHost));
  o.strategy = Strategy::kHost;
  LS_ASSERT_OK_AND_ASSIGN(auto host_fp, LlamaRunner::footprint(path, o, BackendKind::kHost));
  const uint64_t head = sched::slot_span(host_fp.layers.back());
  EXPECT_EQ(host_fp.min_vram_budget, sched::round_up(host_fp.reserve.total(), sched::kSlotAlignment) + head);
  EXPECT_LT(host_fp.min_vram_budget, serial_fp.min_vram_budget);
  // `planned` chooses sites (with its defaults, or a host factor given) and
  // falls back to the host plans where no window fits.
  o.strategy = Strategy::kPlanned;
  for (double factor : {0.0, 1.0}) {
    o.host_compute_factor = factor;
    LS_ASSERT_OK_AND_ASSIGN(auto choose_fp, LlamaRunner::footprint(path, o, BackendKind::kHost));
    EXPECT_EQ(choose_fp.min_vram_budget, host_fp.min_vram_budget) << "host factor " << factor;
  }
  o.host_compute_factor = 0;
  o.strategy = Strategy::kHost;

  // All-resident logits to compare with.
  RunnerOptions ro = base_options();
  ro.strategy = Strategy::kResident;
  LS_ASSERT_OK_AND_ASSIGN(auto resident, LlamaRunner::create(dev, path, ro));
  const auto prompt = random_tokens(rng_, 5, 512);
  const auto next = random_tokens(rng_, 2, 512);
  auto want = prefill_logits(*resident, prompt);
  decode_logits(*resident, next, want);
  resident.reset();

  o.vram_budget = host_fp.min_vram_budget;
  {
    LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(dev, path, o));
    EXPECT_FALSE(r->plan().streams_anything()) << sched::site_map(r->plan());
    EXPECT_EQ(r->plan().count_site(Site::kHost), kBlocks) << sched::site_map(r->plan());
    auto got = prefill_logits(*r, prompt);
    decode_logits(*r, next, got);
    expect_same(got, want, seed_);  // the same CPU kernels on either site
  }
  o.vram_budget = host_fp.min_vram_budget - 1;
  auto r = LlamaRunner::create(dev, path, o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsOutOfBudget()) << r.status().ToString();
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("need at least " + std::to_string(host_fp.min_vram_budget) + " bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("strategy host"), std::string::npos) << msg;
  EXPECT_NE(msg.find("host-site blocks need none"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at this budget fits context"), std::string::npos) << msg;
  std::printf("host strategy: minimum %llu bytes (serial: %llu); one byte less: %s\n",
              static_cast<unsigned long long>(host_fp.min_vram_budget),
              static_cast<unsigned long long>(serial_fp.min_vram_budget), msg.c_str());
}

// `planned` with its defaults (no host factor) against the fixed strategies
// on a link slow enough that streaming a block costs more than computing it
// on the host: after warm-up, each strategy's plan is simulated under the
// same costs (those `planned`'s executor measured; simulated pass times, no
// wall clock compared), and `planned`'s is no slower than the best of
// overlap, host and serial (up to the gain a re-plan needs to move bytes),
// with blocks on the host site.
TEST_F(HybridBlocks, PlannedWithDefaultsIsNoSlowerThanTheBestFixedStrategy) {
  const std::string& path = path_;
  Device& dev = *dev_;
  RunnerOptions o = options_;
  o.link_gbps = 0.01;  // a block of tens of KiB: milliseconds over the link
  const std::vector<Strategy> strategies = {Strategy::kOverlap, Strategy::kHost, Strategy::kSerial, Strategy::kPlanned};
  // One budget every strategy runs at, below all resident.
  for (Strategy s : strategies) {
    o.strategy = s;
    LS_ASSERT_OK_AND_ASSIGN(auto fp, LlamaRunner::footprint(path, o, BackendKind::kHost));
    o.vram_budget = std::max(o.vram_budget, fp.min_vram_budget);
  }
  const auto prompt = random_tokens(rng_, 4, 512);
  const auto next = random_tokens(rng_, 4, 512);  // decode passes: warm-up, re-plan, then steady
  std::map<Strategy, std::unique_ptr<LlamaRunner>> runners;
  for (Strategy s : strategies) {
    o.strategy = s;
    LS_ASSERT_OK_AND_ASSIGN(runners[s], LlamaRunner::create(dev, path, o));
    std::vector<std::vector<float>> logits = prefill_logits(*runners[s], prompt);
    decode_logits(*runners[s], next, logits);
  }
  const sched::Plan& planned_plan = runners[Strategy::kPlanned]->plan();
  const sched::CostModel cost = runners[Strategy::kPlanned]->executor().cost_model();
  auto simulated = [&](Strategy s) {
    sched::PlannerInput in = runners[s]->executor().planner_input(0);
    in.cost = &cost;
    sched::Plan p = runners[s]->plan();
    sched::evaluate_plan(in, p);
    return p.predicted_pass_s;
  };
  double best = 0;
  for (Strategy s : {Strategy::kOverlap, Strategy::kHost, Strategy::kSerial}) {
    const double t = simulated(s);
    std::printf("%s: simulated pass %.3f ms (%s)\n", std::string(llama::strategy_name(s)).c_str(), t * 1e3,
                sched::site_map(runners[s]->plan()).c_str());
    best = best > 0 ? std::min(best, t) : t;
  }
  const double planned = simulated(Strategy::kPlanned);
  std::printf("planned: simulated pass %.3f ms (%s)\n", planned * 1e3, sched::site_map(planned_plan).c_str());
  EXPECT_GT(planned_plan.count_site(Site::kHost), 0) << sched::site_map(planned_plan);
  EXPECT_LE(planned, best * (1 + sched::ExecutorOptions{}.replan_min_gain)) << sched::site_map(planned_plan);
}

}  // namespace
}  // namespace layerstream

// probe_block on a small example model (host backend): the probed layers,
// positive times for decode and prefill, the contention figures, bad
// positions refused; Model::plan measuring now takes its compute from it.
#include "runtime/planning/block_probe.h"

#include <gtest/gtest.h>

#include <cmath>

#include "layerstream/model.h"
#include "runtime/model/example_model.h"
#include "tests/common/testing.h"

namespace layerstream::planning {
namespace {

std::string small_model(testing::TempDir& dir) {
  const ExampleModelSpec spec = {.n_layers = 4, .n_embd = 128, .n_ff = 256, .n_head = 4, .n_head_kv = 2, .n_ctx = 256,
                                 .dtype = GgmlType::Q8_0, .seed = testing::fresh_seed() % 100000};
  const std::string path = dir.file("m.gguf");
  Status st = write_example_model(path, spec);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return path;
}

BlockProbeOptions options_for(const std::string& path) {
  BlockProbeOptions o;
  o.path = path;
  o.runner.n_ctx = 256;
  o.runner.host_threads = 1;
  o.device.backend = BackendKind::kHost;
  o.device.host_threads = 1;
  o.decode_position = 100;
  o.decode_passes = 2;
  o.prefill_tokens = 16;
  o.copy_buffer_bytes = 8 << 20;
  return o;
}

TEST(BlockProbe, TimesAMiddleBlockAndTheHead) {
  testing::TempDir dir;
  BlockProbeOptions o = options_for(small_model(dir));
  o.contention = true;
  auto t = probe_block(o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // 4 blocks and the head: block (5 - 1) / 2 = 2, head 4.
  EXPECT_EQ(t->block_layer, 2);
  EXPECT_EQ(t->head_layer, 4);
  EXPECT_EQ(t->batch, 1);
  EXPECT_GT(t->block_decode_s, 0);
  EXPECT_GT(t->head_decode_s, 0);
  EXPECT_EQ(t->prefill_tokens, 16);
  EXPECT_GT(t->block_prefill_s, 0);
  EXPECT_GT(t->head_prefill_s, 0);
  EXPECT_GT(t->copy_gbps_alone, 0);
  EXPECT_GT(t->copy_gbps_contended, 0);
  EXPECT_GT(t->block_decode_contended_s, 0);
  // The compute a copied byte takes away is a share of the contended block's
  // time (the figure is (t' - t) / (rate' x t')): per byte, less than the
  // time the copy itself took for it at the contended rate.
  EXPECT_TRUE(std::isfinite(t->compute_s_per_copied_byte));
  EXPECT_LT(t->compute_s_per_copied_byte * t->copy_gbps_contended * 1e9, 1.0);
}

TEST(BlockProbe, PositionOutsideTheContextIsRefused) {
  testing::TempDir dir;
  BlockProbeOptions o = options_for(small_model(dir));
  o.decode_position = 256;
  auto t = probe_block(o);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(t.status().IsInvalidArgument()) << t.status().ToString();
  EXPECT_NE(t.status().message().find("position 256"), std::string::npos) << t.status().ToString();
}

// Measured now on the host backend, the plan's compute comes from the probe
// and its copy figures from the contention measurement.
TEST(BlockProbe, PlanMeasuringNowUsesIt) {
  testing::TempDir dir;
  PlanOptions po;
  po.context = 256;
  po.backend = Backend::kHost;
  po.host_threads = 1;
  po.budgets = 2;
  po.ram_budget = 64 << 20;
  po.decode_position = 10;
  auto plan = Model::plan(small_model(dir), po);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->compute_source, "block probe");
  EXPECT_EQ(plan->decode_position, 10);
  EXPECT_GT(plan->copy_alone_gbps, 0);
  EXPECT_GT(plan->copy_beside_compute_gbps, 0);
  ASSERT_FALSE(plan->budgets.empty());
  for (const BudgetPlan& b : plan->budgets) {
    ASSERT_TRUE(b.fits) << b.placement;
    EXPECT_GT(b.predicted_decode_tokens_per_s, 0);
    EXPECT_GT(b.predicted_prefill_tokens_per_s, 0);
  }
  po.decode_position = 256;
  auto bad = Model::plan(small_model(dir), po);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalidArgument()) << bad.status().ToString();
}

}  // namespace
}  // namespace layerstream::planning

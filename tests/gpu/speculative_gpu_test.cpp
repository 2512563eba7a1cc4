// Speculative decoding on the CUDA backend: passes of up to
// kBatchInvariantTokens tokens give each token the bits of a one-token pass
// (the matvec kernels), for every weight type with a coalesced or a
// lane-per-row kernel, and lookup speculation gives plain greedy tokens
// (chains and trees).
// Skips with the reason when no device is present.
#include <gtest/gtest.h>

#include "layerstream/layerstream.h"
#include "runtime/model/example_model.h"
#include "tests/common/gpu.h"
#include "tests/common/pass_invariance.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

ModelOptions cuda_options() {
  ModelOptions o;
  o.backend = Backend::kCuda;
  o.context = 128;
  o.vram_budget = 256ull << 20;
  return o;
}

// A prompt that repeats itself (lookup's case), decoded greedily.
const std::vector<int32_t> kPrompt = {5, 17, 42, 99, 7, 5, 17, 42, 99, 7, 5, 17};
GenerateOptions greedy() {
  GenerateOptions g;
  g.max_tokens = 24;
  g.sampling.temperature = 0;
  g.stop_at_eog = false;
  return g;
}

TEST(SpeculativeGpu, PassRowsEqualOneTokenPasses) {
  LS_REQUIRE_CUDA_DEVICE();
  testing::TempDir dir;
  for (GgmlType ty : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1}) {
    const std::string path = dir.file("m.gguf");
    ASSERT_TRUE(testing::write_scratch_model(path, testing::tiny_llama_spec(ty, testing::fresh_seed(), 128)).ok());
    auto model = Model::open(path, cuda_options()).value();
    const testing::PassInvariance r = testing::measure_pass_invariance(*model, testing::fresh_seed());
    EXPECT_EQ(r.rows_differing, 0) << ggml_type_name(static_cast<uint32_t>(ty)) << ": max |diff| " << r.max_diff;
  }
}

TEST(SpeculativeGpu, LookupGivesPlainGreedyTokens) {
  LS_REQUIRE_CUDA_DEVICE();
  testing::TempDir dir;
  const std::string path = dir.file("m.gguf");
  ASSERT_TRUE(testing::write_scratch_model(path, testing::tiny_llama_spec(GgmlType::Q4_1, testing::fresh_seed(), 128)).ok());
  ModelOptions o = cuda_options();
  o.sequences = 2;
  auto model = Model::open(path, o).value();
  std::shared_ptr<DraftSource> lookup = make_lookup_draft().value();
  GenerateOptions g = greedy();
  const auto plain = model->create_context().value()->generate(kPrompt, g).value();
  g.speculative.draft = lookup;
  const auto spec = model->create_context().value()->generate(kPrompt, g).value();
  EXPECT_EQ(spec.generated[0], plain.generated[0]);
  EXPECT_GT(spec.stats.speculative.drafted, 0);
}

// Trees on the device: side branches are sequences copied on the device
// (copy_sequence) and the kept one's slot becomes the context's.
TEST(SpeculativeGpu, TreesGivePlainGreedyTokens) {
  LS_REQUIRE_CUDA_DEVICE();
  testing::TempDir dir;
  const uint64_t seed = testing::fresh_seed();
  const std::string path = dir.file("m.gguf"), other = dir.file("d.gguf");
  ASSERT_TRUE(testing::write_scratch_model(path, testing::tiny_llama_spec(GgmlType::Q4_1, seed, 128)).ok());
  ASSERT_TRUE(testing::write_scratch_model(other, testing::tiny_llama_spec(GgmlType::Q8_0, seed + 1, 128)).ok());
  ModelOptions o = cuda_options();
  o.sequences = 2 + 2;  // plain, speculative, two side branches
  auto model = Model::open(path, o).value();
  auto draft_model = Model::open(other, cuda_options()).value();
  const std::shared_ptr<DraftSource> sources[] = {make_lookup_draft().value(),
                                                  make_model_draft(draft_model, *model).value()};
  for (const auto& source : sources) {
    GenerateOptions g = greedy();
    const auto plain = model->create_context().value()->generate(kPrompt, g).value();
    g.speculative.draft = source;
    g.speculative.branches = 3;
    g.speculative.draft_max = 5;
    g.speculative.adaptive = false;
    const auto tree = model->create_context().value()->generate(kPrompt, g).value();
    EXPECT_EQ(tree.generated[0], plain.generated[0]) << source->name();
    EXPECT_GE(tree.stats.speculative.branches, tree.stats.speculative.passes);
  }
}

}  // namespace
}  // namespace layerstream

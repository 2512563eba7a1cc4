// Bad input to the Llama runner and the public API: each a clear error with
// a specific code and message, before anything runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "layerstream/layerstream.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/model/example_model.h"
#include "runtime/model/gguf_writer.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

using llama::LlamaRunner;
using llama::RunnerOptions;
using testing::TempDir;
using ::testing::HasSubstr;

// `tokens` appended to sequence 0 in one decode_tokens batch, no logits.
Status decode(LlamaRunner& r, const std::vector<int32_t>& tokens) {
  std::vector<llama::PassToken> batch;
  for (size_t i = 0; i < tokens.size(); ++i)
    batch.push_back({tokens[i], r.position(0) + static_cast<int32_t>(i), 0, false});
  return r.decode_tokens(batch, nullptr);
}

ExampleModelSpec tiny(uint64_t seed) { return testing::tiny_llama_spec(GgmlType::F32, seed, /*n_ctx=*/128); }

// Rewrites the example model's layout, letting `edit` change keys; tensor data random.
Status write_variant(const std::string& path, uint64_t seed,
                     const std::function<bool(const GgufKeyValue&, GgufWriter&)>& keep_key) {
  LS_ASSIGN_OR_RETURN(GgufWriter layout, example_model_layout(tiny(seed)));
  GgufWriter w(4096);
  for (const GgufKeyValue& kv : layout.metadata()) {
    if (kv.key == "general.alignment") continue;
    if (keep_key(kv, w)) LS_RETURN_IF_ERROR(w.add(kv.key, kv.value));
  }
  for (const GgufTensorInfo& t : layout.tensors()) LS_RETURN_IF_ERROR(w.add_tensor(t.name, t.dims, t.type));
  std::mt19937_64 rng(seed);
  return w.write(path, [&](size_t, const GgufTensorInfo& info, TensorSink& sink) {
    std::vector<float> v(info.n_bytes / 4);
    for (auto& x : v) x = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) * 1e-4f;
    return sink.write(v.data(), info.n_bytes);
  });
}

// Each test writes its model at `path` (the tiny one, or a variant) and
// runs it on the host device.
class LlamaErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dev = testing::open_host_device(1);
    ASSERT_TRUE(dev);
  }
  Status write_tiny_model() { return write_example_model(path, tiny(testing::fresh_seed())); }

  TempDir dir;
  const std::string path = dir.file("m.gguf");
  std::unique_ptr<Device> dev;
};

TEST_F(LlamaErrors, PromptLongerThanContext) {
  LS_ASSERT_OK(write_tiny_model());
  RunnerOptions o;
  o.n_ctx = 8;
  LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, o));
  std::vector<int32_t> prompt(9, 5);
  Status st = decode(*r, prompt);
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("sequence 0 is full: the context holds 8 tokens"));
  EXPECT_EQ(r->position(0), 0) << "a refused batch runs no pass";
  // Exactly the context fits.
  prompt.resize(8);
  LS_EXPECT_OK(decode(*r, prompt));
  // A full sequence refuses one more token.
  st = decode(*r, {1});
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("full"));
}

TEST_F(LlamaErrors, TokenOutsideVocabulary) {
  LS_ASSERT_OK(write_tiny_model());
  LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, RunnerOptions{}));
  std::vector<int32_t> prompt = {1, 512};
  Status st = decode(*r, prompt);
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("token id 512 is outside the vocabulary [0, 512)"));
}

TEST_F(LlamaErrors, BudgetCannotHoldWindowPlusKv) {
  LS_ASSERT_OK(write_tiny_model());
  RunnerOptions o;
  o.n_ctx = 128;
  o.vram_budget = 256 << 10;
  auto r = LlamaRunner::create(*dev, path, o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsOutOfBudget()) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("cannot hold the KV cache and activations"));
  EXPECT_THAT(r.status().message(), HasSubstr("KV cache"));
  EXPECT_THAT(r.status().message(), HasSubstr("262144 bytes"));
}

TEST_F(LlamaErrors, UnsupportedArchitecture) {
  ASSERT_TRUE(write_variant(path, testing::fresh_seed(), [](const GgufKeyValue& kv, GgufWriter& w) {
                if (kv.key != "general.architecture") return true;
                (void)w.add(kv.key, GgufValue::string("gpt2"));
                return false;
              }).ok());
  auto r = LlamaRunner::create(*dev, path, RunnerOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsUnsupported()) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("'gpt2' is not supported"));
  EXPECT_THAT(r.status().message(), HasSubstr(path));
  auto m = Model::open(path);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsUnsupported()) << m.status().ToString();
}

TEST_F(LlamaErrors, UnsupportedTensorType) {
  ASSERT_TRUE(write_variant(path, testing::fresh_seed(), [](const GgufKeyValue&, GgufWriter&) { return true; }).ok());
  // Patch blk.0.attn_q.weight's type (F32, id 0) to I32 (id 26): same size, not a weight type.
  std::vector<uint8_t> bytes = testing::read_file(path);
  const std::string name = "blk.0.attn_q.weight";
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(it, bytes.end());
  size_t at = (it - bytes.begin()) + name.size();
  uint32_t n_dims;
  std::memcpy(&n_dims, &bytes[at], 4);
  ASSERT_EQ(n_dims, 2u);
  at += 4 + 8 * n_dims;
  uint32_t type;
  std::memcpy(&type, &bytes[at], 4);
  ASSERT_EQ(type, 0u);
  type = 26;
  std::memcpy(&bytes[at], &type, 4);
  testing::write_file(path, bytes);
  auto r = LlamaRunner::create(*dev, path, RunnerOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsUnsupported()) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("I32"));
}

TEST_F(LlamaErrors, MissingTokenizer) {
  ASSERT_TRUE(write_variant(path, testing::fresh_seed(), [](const GgufKeyValue& kv, GgufWriter&) {
                return kv.key.rfind("tokenizer.", 0) != 0;
              }).ok());
  auto m = Model::open(path);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsNotFound()) << m.status().ToString();
  EXPECT_THAT(m.status().message(), HasSubstr("tokenizer"));
  // The runner alone (token ids only) does not need one.
  LS_EXPECT_OK(LlamaRunner::create(*dev, path, RunnerOptions{}).status());
}

}  // namespace
}  // namespace layerstream

// A read error in the token embedding's rows. With an untied head no layer
// holds token_embd, so every pass reads its tokens' rows from the file
// (through the runner's io::Reader options): an injected EIO there fails the
// batch with an IOError naming the file, the row and the errno, before any
// layer runs; the sequence does not advance, and once the fault has passed
// the same batch decodes to exactly the logits of a runner that never saw it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/fault_injection.h"
#include "runtime/llama/llama_runner.h"
#include "tests/common/runner_logits.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

using llama::LlamaRunner;
using llama::RunnerOptions;

TEST(EmbeddingFaults, ReadErrorInEmbeddingRowsIsAClearError) {
  const uint64_t seed = testing::fresh_seed();
  testing::TempDir dir;
  const std::string path = dir.file("m.gguf");
  ExampleModelSpec spec = testing::tiny_llama_spec(GgmlType::F32, seed, 64);
  spec.tied_output = false;  // token_embd is in no layer: its rows are read from the file
  LS_ASSERT_OK(write_example_model(path, spec));
  auto dev = testing::open_host_device(1);
  ASSERT_TRUE(dev);
  RunnerOptions o;
  o.n_ctx = 64;
  o.strategy = llama::Strategy::kResident;
  const std::vector<int32_t> prompt = {1, 7, 300, 42}, next = {5};
  LS_ASSERT_OK_AND_ASSIGN(auto clean, LlamaRunner::create(*dev, path, o));
  const auto want = testing::runner_logits(*clean, prompt, next);
  clean.reset();

  io::FaultInjector faults;
  o.reader.hooks = &faults;
  LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, o));
  const GgufTensorInfo& te = r->model().token_embd;
  EXPECT_EQ(testing::decode_last_logits(*r, prompt), want[0]);
  io::FaultRule rule;
  rule.kind = io::FaultKind::kEio;
  rule.offset_begin = te.offset;
  rule.offset_end = te.offset + te.n_bytes;
  rule.count = 1;
  faults.add(rule);

  std::vector<float> logits(r->model().hparams.n_vocab);
  const llama::PassToken t{next[0], r->position(0), 0, true};
  const uint64_t passes = r->executor().passes_run();
  Status st = r->decode_tokens(std::span(&t, 1), logits.data());
  ASSERT_FALSE(st.ok()) << "the injected read error was not reported";
  EXPECT_EQ(faults.injected(io::FaultKind::kEio), 1u);
  EXPECT_TRUE(st.IsIOError()) << st.ToString();
  EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("token_embd row " + std::to_string(next[0])), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("Input/output error"), std::string::npos) << st.ToString();
  EXPECT_EQ(r->position(0), static_cast<int>(prompt.size())) << "a failed batch must not advance the sequence";
  EXPECT_EQ(r->executor().passes_run(), passes) << "no layer runs on rows that were not read";

  // The rule is spent: the same batch now decodes as if nothing had happened.
  LS_ASSERT_OK(r->decode_tokens(std::span(&t, 1), logits.data()));
  EXPECT_EQ(0, std::memcmp(logits.data(), want[1].data(), logits.size() * sizeof(float))) << "seed " << seed;
}

}  // namespace
}  // namespace layerstream

// BatchScheduler on a tiny model (host backend): requests that share passes
// get exactly what each gets alone (greedy), in fewer passes than tokens;
// more requests than sequences wait in the queue; a full queue refuses; a
// cancelled request frees its sequence; prompts that do not fit are refused.
#include "runtime/serve/batch_scheduler.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "layerstream/layerstream.h"
#include "runtime/model/example_model.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream::serve {
namespace {

class BatchSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("tiny.gguf");
    ASSERT_TRUE(write_example_model(path_, testing::tiny_llama_spec(GgmlType::F32, 7, 128)).ok());
  }
  std::shared_ptr<Model> open(int sequences, int context = 64) {
    ModelOptions o;
    o.backend = Backend::kHost;
    o.host_threads = 2;
    o.context = context;
    o.sequences = sequences;
    auto m = Model::open(path_, o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : nullptr;
  }
  static GenerationRequest greedy(std::vector<int32_t> prompt, int n) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = n;
    r.sampling.temperature = 0;
    return r;
  }
  testing::TempDir dir_;
  std::string path_;
};

TEST_F(BatchSchedulerTest, SharedPassesGiveWhatEachRequestGetsAlone) {
  auto model = open(4);
  ASSERT_TRUE(model);
  auto sched = BatchScheduler::create(model, {.parallel = 4, .queue = 8});
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  std::mt19937_64 rng(testing::fresh_seed());
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) {  // 6 requests, 4 sequences: two wait
    std::vector<int32_t> p(3 + rng() % 9);
    for (auto& t : p) t = static_cast<int32_t>(1 + rng() % 500);
    reqs.push_back(greedy(p, 6 + i));
  }
  std::vector<RequestState::Chunk> alone;
  for (const auto& r : reqs) {
    auto st = (*sched)->submit(r);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    alone.push_back((*st)->wait_all());
    ASSERT_NE(alone.back().reason, FinishReason::kError) << alone.back().error;
  }
  const SchedulerMetrics before = (*sched)->metrics();
  std::vector<std::shared_ptr<RequestState>> states;
  for (const auto& r : reqs) {
    auto st = (*sched)->submit(r);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    states.push_back(*st);
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestState::Chunk c = states[i]->wait_all();
    EXPECT_EQ(c.text, alone[i].text) << "request " << i;
    EXPECT_EQ(c.completion_tokens, alone[i].completion_tokens) << "request " << i;
    EXPECT_EQ(c.reason, alone[i].reason) << "request " << i;
    EXPECT_EQ(c.prompt_tokens, static_cast<int>(reqs[i].prompt.size()));
  }
  const SchedulerMetrics after = (*sched)->metrics();
  const uint64_t tokens = after.generated_tokens - before.generated_tokens;
  const uint64_t passes = after.passes - before.passes;
  EXPECT_GT(tokens, 0u);
  EXPECT_GT(passes, 0u) << "Context::take_decode_totals counts the passes";
  EXPECT_LT(passes * 2, tokens) << "batched requests share passes";
  EXPECT_EQ(after.active, 0);
  EXPECT_EQ(after.queued, 0);
}

TEST_F(BatchSchedulerTest, AFullQueueRefusesAndACancelledRequestFreesItsSequence) {
  // A long request (1000 tokens: far more than the few it makes between its
  // first chunk and the cancel, however fast the machine) so the cancel
  // always finds it running.
  auto model = open(1, 1024);
  ASSERT_TRUE(model);
  auto sched = BatchScheduler::create(model, {.parallel = 1, .queue = 0});
  ASSERT_TRUE(sched.ok());
  auto first = (*sched)->submit(greedy({1, 2, 3}, 1000));
  ASSERT_TRUE(first.ok());
  RequestState::Chunk c;
  while (!(*first)->next(c, std::chrono::milliseconds(100)) || c.text.empty()) {
    ASSERT_FALSE(c.done) << "finished before it could be cancelled";
  }
  auto refused = (*sched)->submit(greedy({4, 5}, 2));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kOutOfBudget);
  EXPECT_NE(refused.status().message().find("--queue"), std::string::npos) << refused.status().message();

  (*first)->cancel();
  const RequestState::Chunk end = (*first)->wait_all();
  EXPECT_EQ(end.reason, FinishReason::kCancelled);
  EXPECT_LT(end.completion_tokens, 1000);
  auto next = (*sched)->submit(greedy({4, 5}, 2));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ((*next)->wait_all().completion_tokens, 2);
  const SchedulerMetrics m = (*sched)->metrics();
  EXPECT_EQ(m.requests_cancelled, 1u);
  EXPECT_EQ(m.requests_rejected, 1u);
}

TEST_F(BatchSchedulerTest, RefusesPromptsThatDoNotFitAndDrainsOnShutdown) {
  auto model = open(2);
  ASSERT_TRUE(model);
  auto sched = BatchScheduler::create(model, {.parallel = 2, .queue = 2});
  ASSERT_TRUE(sched.ok());
  auto too_long = (*sched)->submit(greedy(std::vector<int32_t>(64, 5), 1));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("--ctx"), std::string::npos);

  auto running = (*sched)->submit(greedy({1, 2}, 20));
  ASSERT_TRUE(running.ok());
  (*sched)->drain(std::chrono::seconds(60));  // lets it finish
  EXPECT_TRUE((*running)->done());
  const RequestState::Chunk c = (*running)->wait_all();
  EXPECT_NE(c.reason, FinishReason::kCancelled);
  auto after = (*sched)->submit(greedy({1}, 1));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace layerstream::serve

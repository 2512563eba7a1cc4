// BatchScheduler on a tiny model (host backend): requests that share passes
// get exactly what each gets alone (greedy), in fewer passes than tokens;
// more requests than sequences wait in the queue; a full queue refuses; a
// cancelled request frees its sequence; prompts that do not fit are refused;
// the prefix cache reuses earlier requests' KV (prefilling only the rest)
// without changing any output, and keeps serving correctly when its pool
// holds far fewer prompts than arrive.
#include "runtime/serve/batch_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
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
    ASSERT_NE(alone.back().failure, Failure::kError) << alone.back().error;
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
  EXPECT_EQ(end.failure, Failure::kCancelled);
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
  EXPECT_NE(c.failure, Failure::kCancelled);
  auto after = (*sched)->submit(greedy({1}, 1));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kCancelled);
}

// Runs `reqs` one after another (each waits for the last) and returns their ends.
std::vector<RequestState::Chunk> run_in_turn(BatchScheduler& sched, const std::vector<GenerationRequest>& reqs) {
  std::vector<RequestState::Chunk> out;
  for (const auto& r : reqs) {
    auto st = sched.submit(r);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (!st.ok()) return out;
    out.push_back((*st)->wait_all());
    EXPECT_NE(out.back().failure, Failure::kError) << out.back().error;
  }
  return out;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = static_cast<int32_t>(1 + rng() % 500);
  return p;
}

TEST_F(BatchSchedulerTest, TheSamePromptAgainPrefillsOnlyItsLastToken) {
  auto model = open(2, 128);
  ASSERT_TRUE(model);
  auto sched = BatchScheduler::create(model, {.parallel = 2, .queue = 4});
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  std::mt19937_64 rng(testing::fresh_seed());
  const auto prompt = random_tokens(rng, 40);
  std::vector<uint64_t> prefilled;
  std::vector<RequestState::Chunk> ends;
  for (int i = 0; i < 3; ++i) {
    const uint64_t before = (*sched)->metrics().prefill_tokens;
    ends.push_back(run_in_turn(**sched, {greedy(prompt, 8)}).at(0));
    prefilled.push_back((*sched)->metrics().prefill_tokens - before);
  }
  EXPECT_EQ(ends[0].cached_tokens, 0);
  EXPECT_EQ(prefilled[0], 40u);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(ends[i].cached_tokens, 39) << "request " << i;
    EXPECT_EQ(prefilled[i], 1u) << "request " << i;
    EXPECT_EQ(ends[i].text, ends[0].text) << "request " << i;
  }
  const SchedulerMetrics m = (*sched)->metrics();
  EXPECT_EQ(m.prefix_cache_queries, 120u);
  EXPECT_EQ(m.prefix_cache_hits, 78u);
  EXPECT_EQ(m.time_to_first_token.count, 3u);
}

TEST_F(BatchSchedulerTest, EachTurnOfAConversationPrefillsOnlyItsNewTokens) {
  auto model = open(2, 256);
  ASSERT_TRUE(model);
  auto sched = BatchScheduler::create(model, {.parallel = 1, .queue = 2, .cache_sequences = 1});
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  std::mt19937_64 rng(testing::fresh_seed());
  std::vector<int32_t> history;
  for (int turn = 0; turn < 6; ++turn) {
    const size_t held = history.size();
    // A first turn long enough to be worth a copy (PrefixCache::kMinCopyTokens).
    const auto fresh = random_tokens(rng, turn == 0 ? 20 : 5 + turn);
    history.insert(history.end(), fresh.begin(), fresh.end());
    const uint64_t before = (*sched)->metrics().prefill_tokens;
    const RequestState::Chunk c = run_in_turn(**sched, {greedy(history, 4)}).at(0);
    const uint64_t prefilled = (*sched)->metrics().prefill_tokens - before;
    // The earlier turns come from the cache (more when a new token happens
    // to equal what was generated after them).
    EXPECT_GE(c.cached_tokens, static_cast<int>(held)) << "turn " << turn;
    EXPECT_EQ(prefilled, history.size() - c.cached_tokens) << "turn " << turn;
    EXPECT_LE(prefilled, fresh.size()) << "turn " << turn;
  }
}

// 10 distinct prompts (half share a long prefix) through a pool of 2
// sequences, twice over and all at once: the cache evicts, copies and cuts,
// and every greedy output is what a scheduler without the cache gives.
TEST_F(BatchSchedulerTest, OutputsMatchWithoutTheCacheUnderEviction) {
  std::mt19937_64 rng(testing::fresh_seed());
  const auto shared = random_tokens(rng, 24);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 10; ++i) {
    auto p = i % 2 ? random_tokens(rng, 20) : shared;
    const auto tail = random_tokens(rng, 3 + i);
    p.insert(p.end(), tail.begin(), tail.end());
    reqs.push_back(greedy(p, 5 + i % 4));
  }
  std::vector<RequestState::Chunk> reference;
  {
    auto model = open(1, 128);
    ASSERT_TRUE(model);
    auto plain = BatchScheduler::create(model, {.parallel = 1, .queue = 16, .prefix_cache = false});
    ASSERT_TRUE(plain.ok());
    reference = run_in_turn(**plain, reqs);
    EXPECT_EQ((*plain)->metrics().prefix_cache_hits, 0u);
  }
  auto model = open(2, 128);
  ASSERT_TRUE(model);
  auto sched = BatchScheduler::create(model, {.parallel = 1, .queue = 16, .cache_sequences = 1});
  ASSERT_TRUE(sched.ok());
  for (int round = 0; round < 2; ++round) {
    const auto got = run_in_turn(**sched, reqs);
    ASSERT_EQ(got.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].text, reference[i].text) << round << "/" << i;
  }
  const SchedulerMetrics m = (*sched)->metrics();
  EXPECT_GT(m.prefix_cache_hits, 0u) << "the shared prefix was reused";
  EXPECT_LE(m.kv_cached_tokens, 2 * 128);

  // All at once, 2 decoding together and 1 cache sequence: copies from busy
  // sequences and from ones admitted in the same pass.
  auto model3 = open(3, 128);
  ASSERT_TRUE(model3);
  auto wide = BatchScheduler::create(model3, {.parallel = 2, .queue = 16, .cache_sequences = 1});
  ASSERT_TRUE(wide.ok());
  std::vector<std::shared_ptr<RequestState>> states;
  for (const auto& r : reqs) {
    auto st = (*wide)->submit(r);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    states.push_back(*st);
  }
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(states[i]->wait_all().text, reference[i].text) << i;
}

// n choices share one prefill: the prompt is decoded once and copied; each
// choice samples with seed + i and gets what a single request with that
// seed gets.
TEST_F(BatchSchedulerTest, ChoicesShareThePromptPrefillAndUseSeedPlusI) {
  auto model = open(4);
  ASSERT_TRUE(model);
  auto sched = BatchScheduler::create(model, {.parallel = 3, .queue = 4, .prefix_cache = false});
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  std::mt19937_64 rng(testing::fresh_seed());
  GenerationRequest r = greedy({}, 8);
  for (int i = 0; i < 9; ++i) r.prompt.push_back(static_cast<int32_t>(1 + rng() % 500));
  r.sampling = {.temperature = 1.5f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = rng() % 1000};
  std::vector<RequestState::Chunk> alone;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest one = r;
    one.sampling.seed += i;
    auto st = (*sched)->submit(one);
    ASSERT_TRUE(st.ok());
    alone.push_back((*st)->wait_all());
  }
  const uint64_t before = (*sched)->metrics().prefill_tokens;
  auto states = (*sched)->submit_n(r, 3);
  ASSERT_TRUE(states.ok()) << states.status().ToString();
  ASSERT_EQ(states->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const RequestState::Chunk c = (*states)[i]->wait_all();
    EXPECT_EQ(c.text, alone[i].text) << "choice " << i;
    EXPECT_EQ(c.completion_tokens, alone[i].completion_tokens) << "choice " << i;
  }
  EXPECT_EQ((*sched)->metrics().prefill_tokens - before, r.prompt.size());  // once, not three times
  auto too_many = (*sched)->submit_n(r, 4);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("n is 4"), std::string::npos) << too_many.status().message();
}


// Logprobs of generated tokens, their top alternatives and the prompt's
// equal the log-softmax of the logits one Context::decode over prompt and
// answer gives, within 1e-4; with the prefix cache holding the prompt.
TEST_F(BatchSchedulerTest, LogprobsEqualTheLogSoftmaxOfTheLogits) {
  auto model = open(3);
  ASSERT_TRUE(model);
  auto sched = BatchScheduler::create(model, {.parallel = 2, .queue = 4});
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  std::mt19937_64 rng(testing::fresh_seed());
  GenerationRequest r = greedy({}, 6);
  for (int i = 0; i < 7; ++i) r.prompt.push_back(static_cast<int32_t>(1 + rng() % 500));
  r.sampling = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = rng()};
  r.logprobs = 4;
  ASSERT_TRUE((*sched)->submit(r).ok());  // leaves the prompt in the prefix cache
  r.prompt_logprobs = true;
  auto st = (*sched)->submit(r);
  ASSERT_TRUE(st.ok());
  const RequestState::Chunk c = (*st)->wait_all();
  ASSERT_EQ(c.reason, FinishReason::kLength) << c.error;
  ASSERT_EQ(c.logprobs.size(), 6u);
  ASSERT_EQ(c.prompt_logprobs.size(), r.prompt.size() - 1);

  auto ref = model->create_context();
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  std::vector<int32_t> all = r.prompt;
  for (const TokenLogprob& t : c.logprobs) all.push_back(t.token);
  Batch b;
  for (size_t i = 0; i + 1 < all.size(); ++i) b.add(all[i], static_cast<int32_t>(i), 0, true);
  ASSERT_TRUE((*ref)->decode(b).ok());
  for (size_t i = 1; i < all.size(); ++i) {
    const std::span<const float> row = (*ref)->logits(static_cast<int>(i) - 1);
    const bool prompt = i < r.prompt.size();
    const TokenLogprob& lp = prompt ? c.prompt_logprobs[i - 1] : c.logprobs[i - r.prompt.size()];
    EXPECT_EQ(lp.token, all[i]);
    EXPECT_NEAR(lp.logprob, testing::log_softmax_at(row, all[i]), 1e-4) << "token " << i;
    ASSERT_EQ(lp.top.size(), 4u);
    EXPECT_EQ(lp.top[0].first, static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    for (auto [id, v] : lp.top) EXPECT_NEAR(v, testing::log_softmax_at(row, id), 1e-4) << "token " << i;
  }
}

}  // namespace
}  // namespace layerstream::serve

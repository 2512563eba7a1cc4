// The public API's Model / Context / Batch on the host backend:
//  - a multi-turn conversation continues in its KV cache: the second turn
//    prefills only its new tokens, and its logits equal those of one pass
//    over the whole conversation (generate() and the Batch API);
//  - two contexts on one model from two threads at once: the resident bytes
//    are loaded once (load_bytes), both generate what each generates alone;
//  - sequence copy (shared prefix) and remove; batch errors name the token.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <thread>

#include "kernels/cpu/attention_split.h"
#include "kernels/cpu/qdot.h"
#include "layerstream/layerstream.h"
#include "runtime/model/example_model.h"
#include "runtime/model/gguf_file.h"
#include "tests/common/pass_invariance.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int n) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(1 + rng() % 500);
  return t;
}

ModelOptions host_options(int sequences) {
  ModelOptions o;
  o.backend = Backend::kHost;
  o.host_threads = 2;
  o.context = 96;
  o.sequences = sequences;
  // The exact path: its matmul gives each row the same sums whatever the
  // number of tokens in the pass, so a continued conversation equals one pass
  // over it bit for bit (the int8 fast path's prefill GEMM and decode matvec
  // sum in different orders, ~1e-7 apart).
  o.exact = true;
  return o;
}

GenerateOptions greedy(int n, bool keep_logits) {
  GenerateOptions g;
  g.max_tokens = n;
  g.sampling.temperature = 0;
  g.stop_at_eog = false;
  g.keep_logits = keep_logits;
  return g;
}

// Every row of `logits` (n_vocab each) of one pass over `tokens` on sequence `seq`.
std::vector<std::vector<float>> one_pass_logits(Context& ctx, int seq, const std::vector<int32_t>& tokens) {
  Batch b;
  for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<int32_t>(i), seq, true);
  Status st = ctx.decode(b);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto l = ctx.logits(static_cast<int>(i));
    rows.emplace_back(l.begin(), l.end());
  }
  return rows;
}

class ContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = testing::fresh_seed();
    path_ = dir_.file("m.gguf");
    ASSERT_TRUE(write_example_model(path_, testing::tiny_llama_spec(GgmlType::F32, seed_, 128)).ok());
  }
  uint64_t seed_ = 0;
  TempDir dir_;
  std::string path_;
};

TEST_F(ContextTest, SecondTurnPrefillsOnlyNewTokensAndMatchesOnePass) {
  std::mt19937_64 rng(seed_);
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, host_options(2)));
  LS_ASSERT_OK_AND_ASSIGN(auto chat, model->create_context());
  const auto turn1 = random_tokens(rng, 7), turn2 = random_tokens(rng, 5);

  LS_ASSERT_OK_AND_ASSIGN(GenerateResult r1, chat->generate(turn1, greedy(4, false)));
  EXPECT_EQ(r1.stats.prompt_tokens, 7);
  EXPECT_EQ(chat->position(0), 7 + 3);  // the 4th token is sampled, not yet decoded
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult r2, chat->generate(turn2, greedy(4, true)));
  // New tokens only: turn 1's last sampled token, then turn 2.
  EXPECT_EQ(r2.stats.prompt_tokens, 1 + 5);
  EXPECT_EQ(r2.prompt_tokens.front(), r1.generated[0].back());
  EXPECT_EQ(chat->position(0), 7 + 4 + 5 + 3);

  // One pass over the whole conversation, on a second context.
  std::vector<int32_t> all = turn1;
  all.insert(all.end(), r1.generated[0].begin(), r1.generated[0].end());
  all.insert(all.end(), turn2.begin(), turn2.end());
  all.insert(all.end(), r2.generated[0].begin(), r2.generated[0].end() - 1);
  LS_ASSERT_OK_AND_ASSIGN(auto whole, model->create_context());
  const auto rows = one_pass_logits(*whole, 0, all);
  ASSERT_EQ(r2.logits.size(), 4u * model->n_vocab());
  const size_t first = turn1.size() + 4 + turn2.size() - 1;  // the row turn 2's first token came from
  for (int j = 0; j < 4; ++j) {
    std::vector<float> got(r2.logits.begin() + j * model->n_vocab(), r2.logits.begin() + (j + 1) * model->n_vocab());
    EXPECT_EQ(got, rows[first + j]) << "generated token " << j << " of turn 2";
  }

  // The same with the Batch API: turn 2's new tokens with logits for each.
  ASSERT_TRUE(chat->clear().ok());
  std::vector<int32_t> history(all.begin(), all.begin() + turn1.size() + 4);
  Batch b1;
  b1.add_sequence(history, 0, 0);
  LS_ASSERT_OK(chat->decode(b1));
  Batch b2;
  for (size_t i = 0; i < turn2.size(); ++i) b2.add(turn2[i], static_cast<int32_t>(history.size() + i), 0, true);
  LS_ASSERT_OK(chat->decode(b2));
  for (size_t i = 0; i < turn2.size(); ++i) {
    auto l = chat->logits(static_cast<int>(i));
    EXPECT_EQ(std::vector<float>(l.begin(), l.end()), rows[history.size() + i]) << "turn 2 token " << i;
  }
}

// Batch invariance beyond a verification pass: a prefill of many tokens over
// a context longer than one attention chunk (kSplitPositions, where a
// one-token pass splits its attention) gives each token the bits of
// one-token passes: quantised weights on the fast (int8) path, what models
// ship as, and F32 on the exact path. Reusing KV that decode passes wrote (a
// chat's earlier answer, the prefix cache) relies on it: the reused rows are
// those a prefill computes. (Float weights on the fast path and quantised
// ones on the exact path hold it up to kBatchInvariantTokens only.)
TEST(BatchInvariance, LongPrefillRowsEqualOneTokenPasses) {
  if (kernels::cpu::amx::supported())
    GTEST_SKIP() << "AMX's tile GEMM (passes of 16 tokens or more) sums in its own order";
  testing::TempDir dir;
  constexpr int kPrompt = static_cast<int>(kernels::cpu::kSplitPositions) - 8, kPass = 24;
  struct Case {
    GgmlType type;
    bool exact;
  };
  for (const Case c : {Case{GgmlType::Q8_0, false}, Case{GgmlType::Q4_0, false}, Case{GgmlType::Q4_1, false},
                       Case{GgmlType::F32, true}}) {
    const std::string path = dir.file("m.gguf");
    ASSERT_TRUE(testing::write_scratch_model(path, testing::tiny_llama_spec(c.type, testing::fresh_seed(), 256)).ok());
    ModelOptions o = host_options(1);
    o.context = kPrompt + kPass;
    o.exact = c.exact;
    LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path, o));
    const testing::PassInvariance r = testing::measure_pass_invariance(*model, testing::fresh_seed(), kPrompt, kPass);
    EXPECT_EQ(r.rows_differing, 0) << ggml_type_name(static_cast<uint32_t>(c.type)) << (c.exact ? " exact" : " fast")
                                   << ": max |diff| " << r.max_diff;
  }
}

// PromptStart::kReusePrefix: each call's prompt is the whole sequence; the
// context keeps the longest prefix it holds (the previous prompt and answer)
// and prefills the rest, with the tokens and logits of a fresh context.
TEST_F(ContextTest, ReusedPrefixPrefillsOnlyTheRestAndMatchesAFreshContext) {
  std::mt19937_64 rng(seed_);
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, host_options(2)));
  LS_ASSERT_OK_AND_ASSIGN(auto chat, model->create_context());
  const auto fresh_run = [&](const std::vector<int32_t>& prompt) {
    auto ctx = model->create_context().value();
    return ctx->generate(prompt, greedy(4, true)).value();
  };
  GenerateOptions reuse = greedy(4, true);
  reuse.prompt_start = PromptStart::kReusePrefix;

  const std::vector<int32_t> first = random_tokens(rng, 20);
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult r1, chat->generate(first, reuse));
  EXPECT_EQ(r1.stats.cached_tokens, 0);
  EXPECT_EQ(r1.stats.prompt_tokens, 20);
  // A chat's next turn: the first prompt, its answer, a new message. The
  // answer's last token was sampled, never decoded: it is prefilled.
  std::vector<int32_t> second = first;
  second.insert(second.end(), r1.generated[0].begin(), r1.generated[0].end());
  const auto message = random_tokens(rng, 12);
  second.insert(second.end(), message.begin(), message.end());
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult r2, chat->generate(second, reuse));
  EXPECT_EQ(r2.stats.cached_tokens, 20 + 3);
  EXPECT_EQ(r2.stats.prompt_tokens, 1 + 12);
  const GenerateResult alone = fresh_run(second);
  EXPECT_EQ(r2.generated, alone.generated);
  EXPECT_EQ(r2.logits, alone.logits) << "the reused KV is what a prefill of the whole prompt computes";

  // The same prompt again: everything but its last token is reused.
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult again, chat->generate(second, reuse));
  EXPECT_EQ(again.stats.cached_tokens, static_cast<int>(second.size()) - 1);
  EXPECT_EQ(again.stats.prompt_tokens, 1);
  EXPECT_EQ(again.logits, alone.logits);
  // A prompt that leaves the held tokens after 7: only those 7 are kept.
  std::vector<int32_t> branch(second.begin(), second.begin() + 7);
  const auto other = random_tokens(rng, 9);
  branch.insert(branch.end(), other.begin(), other.end());
  if (branch[7] == second[7]) branch[7] = branch[7] % 500 + 1;
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult b, chat->generate(branch, reuse));
  EXPECT_EQ(b.stats.cached_tokens, 7);
  EXPECT_EQ(b.logits, fresh_run(branch).logits);

  // The opt-out: a fresh prefill of the whole prompt.
  GenerateOptions fresh = greedy(4, true);
  fresh.prompt_start = PromptStart::kFresh;
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult f, chat->generate(branch, fresh));
  EXPECT_EQ(f.stats.cached_tokens, 0);
  EXPECT_EQ(f.stats.prompt_tokens, static_cast<int>(branch.size()));
  EXPECT_EQ(f.logits, b.logits);
  // A Batch decode counts as held tokens too; a text prompt gets BOS.
  LS_ASSERT_OK(chat->clear());
  const std::vector<int32_t> text = model->tokenize("hello world again", /*add_bos=*/true);
  Batch decoded;
  decoded.add_sequence(text, 0, 0);
  LS_ASSERT_OK(chat->decode(decoded));
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult t, chat->generate("hello world again", reuse));
  EXPECT_EQ(t.stats.cached_tokens, static_cast<int>(text.size()) - 1);
  // Refused before anything changes: a prompt longer than the context.
  const int held = chat->position(0);
  const auto long_prompt = random_tokens(rng, chat->n_context() + 1);
  EXPECT_THAT(chat->generate(long_prompt, reuse).status().message(), HasSubstr("longer than the context"));
  EXPECT_EQ(chat->position(0), held);
}

TEST_F(ContextTest, TwoContextsOnTwoThreadsShareResidentsAndMatchAlone) {
  std::mt19937_64 rng(seed_);
  ModelOptions o = host_options(2);
  o.strategy = Strategy::kResident;
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, o));
  const uint64_t loaded = model->load_bytes();
  EXPECT_GE(loaded, model->info().file_bytes / 2) << "every layer is resident: the weights were loaded";
  const std::vector<std::vector<int32_t>> prompts = {random_tokens(rng, 6), random_tokens(rng, 9)};

  // Alone, one after the other: the reference.
  std::vector<GenerateResult> alone(2);
  for (int i = 0; i < 2; ++i) {
    LS_ASSERT_OK_AND_ASSIGN(auto ctx, model->create_context());
    LS_ASSERT_OK_AND_ASSIGN(alone[i], ctx->generate(prompts[i], greedy(12, true)));
  }
  // Together: two contexts, two threads, two turns each.
  LS_ASSERT_OK_AND_ASSIGN(auto c0, model->create_context());
  LS_ASSERT_OK_AND_ASSIGN(auto c1, model->create_context());
  EXPECT_EQ(model->free_sequences(), 0);
  std::vector<Context*> ctx = {c0.get(), c1.get()};
  std::vector<Result<GenerateResult>> together(2, Status::Internal("not run"));
  std::vector<Status> second(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      together[i] = ctx[i]->generate(prompts[i], greedy(12, true));
      second[i] = ctx[i]->generate(prompts[1 - i], greedy(3, false)).status();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(together[i].ok()) << together[i].status().ToString();
    LS_EXPECT_OK(second[i]);
    EXPECT_EQ(together[i]->generated, alone[i].generated) << "context " << i;
    EXPECT_EQ(together[i]->logits, alone[i].logits) << "context " << i;
    EXPECT_EQ(together[i]->stats.load_bytes, loaded);
  }
  EXPECT_EQ(model->load_bytes(), loaded) << "contexts load no weights";
}

TEST_F(ContextTest, CopiedPrefixContinuesLikeTheOriginal) {
  std::mt19937_64 rng(seed_);
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, host_options(3)));
  ContextOptions co;
  co.sequences = 3;
  LS_ASSERT_OK_AND_ASSIGN(auto ctx, model->create_context(co));
  const auto prefix = random_tokens(rng, 8), tail = random_tokens(rng, 3);
  Batch b;
  b.add_sequence(prefix, 0, 0);
  LS_ASSERT_OK(ctx->decode(b));
  LS_ASSERT_OK(ctx->copy_sequence(0, 2));
  EXPECT_EQ(ctx->position(2), 8);
  // The same tail on 0 and on the copy, in one batch, interleaved.
  Batch t;
  for (size_t i = 0; i < tail.size(); ++i) {
    t.add(tail[i], static_cast<int32_t>(8 + i), 2, i + 1 == tail.size());
    t.add(tail[i], static_cast<int32_t>(8 + i), 0, i + 1 == tail.size());
  }
  LS_ASSERT_OK(ctx->decode(t));
  auto a = ctx->logits(static_cast<int>(t.size()) - 2), c = ctx->logits(static_cast<int>(t.size()) - 1);
  ASSERT_EQ(a.size(), static_cast<size_t>(model->n_vocab()));
  EXPECT_EQ(std::vector<float>(a.begin(), a.end()), std::vector<float>(c.begin(), c.end()));
  EXPECT_TRUE(ctx->logits(0).empty()) << "token 0 asked for no logits";
  // Removing the tail and decoding it again gives the same logits.
  LS_ASSERT_OK(ctx->remove(0, 8));
  EXPECT_EQ(ctx->position(0), 8);
  Batch again;
  again.add_sequence(tail, 8, 0);
  LS_ASSERT_OK(ctx->decode(again));
  auto r = ctx->logits(static_cast<int>(tail.size()) - 1);
  EXPECT_EQ(std::vector<float>(r.begin(), r.end()), std::vector<float>(a.begin(), a.end()));
}

TEST_F(ContextTest, BadBatchesAndPoolErrorsAreClear) {
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, host_options(1)));
  LS_ASSERT_OK_AND_ASSIGN(auto ctx, model->create_context());
  auto second = model->create_context();
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(second.status().IsOutOfBudget());
  EXPECT_THAT(second.status().message(), HasSubstr("sequences >= 2"));
  Batch b;
  b.add(5, 3, 0, true);
  Status st = ctx->decode(b);
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_THAT(st.message(), HasSubstr("at position 3 but the sequence continues at 0"));
  b.clear();
  b.add(5, 0, 1, true);
  EXPECT_THAT(ctx->decode(b).message(), HasSubstr("sequence 1 is outside this context's [0, 1)"));
  b.clear();
  b.add(512, 0, 0, true);
  EXPECT_THAT(ctx->decode(b).message(), HasSubstr("token id 512 is outside the vocabulary"));
  EXPECT_EQ(ctx->position(0), 0) << "a refused batch decodes nothing";
}

// Misuse by index (a sequence or token row that does not exist) is a bug in
// the app: it aborts with the call and the range, as Result::value() does on
// an error (docs/RELIABILITY.md, "Mistakes in calls").
TEST_F(ContextTest, IndexesOutsideTheirRangeAbortNamingTheRange) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, host_options(1)));
  LS_ASSERT_OK_AND_ASSIGN(auto ctx, model->create_context());
  EXPECT_DEATH((void)ctx->position(1), "Context::position: sequence 1 is outside \\[0, 1\\)");
  EXPECT_DEATH((void)ctx->logits(0), "Context::logits: token 0 is outside the last decode's \\[0, 0\\)");
  Batch b;
  b.add(5, 0, 0, false);
  b.add(6, 1, 0, true);
  LS_ASSERT_OK(ctx->decode(b));
  EXPECT_EQ(ctx->last_decode_tokens(), 2);
  EXPECT_TRUE(ctx->logits(0).empty()) << "in range, asked for no logits";
  EXPECT_EQ(ctx->logits(1).size(), static_cast<size_t>(model->n_vocab()));
  EXPECT_DEATH((void)ctx->logits(2), "token 2 is outside the last decode's \\[0, 2\\)");
}

TEST_F(ContextTest, LoadProgressReportsAndCancels) {
  ModelOptions o = host_options(1);
  o.strategy = Strategy::kResident;
  std::vector<float> seen;
  o.progress = [&](float f) { return seen.push_back(f), true; };
  LS_ASSERT_OK(Model::open(path_, o).status());
  ASSERT_FALSE(seen.empty());
  EXPECT_FLOAT_EQ(seen.back(), 1.0f);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  o.progress = [](float) { return false; };
  auto m = Model::open(path_, o);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsCancelled()) << m.status().ToString();
}

TEST(SamplerChain, GreedyPenaltyAndSeededDraws) {
  std::vector<float> logits = {0.1f, 2.0f, 1.9f, -1.0f};
  SamplerChain greedy = SamplerChain::from({.temperature = 0});
  EXPECT_EQ(greedy.sample(logits), 1);
  // The penalty divides token 1's positive logit: 2.0 / 1.5 < 1.9.
  SamplerChain pen = SamplerChain::from({.temperature = 0, .repeat_penalty = 1.5f});
  pen.accept(1);
  EXPECT_EQ(pen.sample(logits), 2);
  // top-k 1 leaves only the best, whatever the draw.
  SamplerChain k1 = SamplerChain::from({.temperature = 1.0f, .top_k = 1, .seed = 7});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(k1.sample(logits), 1);
  // min-p 0.5 keeps tokens 1 and 2 (e^-0.1 of the top), never 0 or 3.
  SamplerChain mp = SamplerChain::from({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.5f, .seed = 3});
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 400; ++i) ++counts[mp.sample(logits)];
  EXPECT_EQ(counts[0] + counts[3], 0);
  EXPECT_GT(counts[1], 100);
  EXPECT_GT(counts[2], 100);
  // The same seed gives the same draws.
  SamplerChain a = SamplerChain::from({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = 11});
  SamplerChain b = SamplerChain::from({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = 11});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(logits), b.sample(logits));
}

// A greedy chain without a penalty picks the argmax straight from the row;
// it must pick what the candidate list would: the largest logit, the lowest
// id on a tie, whatever top-k / top-p / min-p stand before it. A penalty of
// 1 forces the list path (it changes no logit), so the two are compared on
// fresh random rows with their maximum repeated at random places.
TEST(SamplerChain, GreedyArgmaxEqualsTheCandidateListPick) {
  std::mt19937_64 rng(testing::fresh_seed());
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> row(1000 + rng() % 50000);
    for (float& x : row) x = nd(rng);
    const float top = 40.0f + static_cast<float>(rng() % 3);
    const int copies = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < copies; ++c) row[rng() % row.size()] = top;
    const int32_t want = static_cast<int32_t>(std::find(row.begin(), row.end(), top) - row.begin());
    SamplingOptions o{.temperature = 0, .top_k = static_cast<int>(rng() % 60), .seed = static_cast<uint64_t>(trial)};
    SamplerChain fast = SamplerChain::from(o);
    SamplerChain list(o.seed);
    list.add_repetition_penalty(1.0f, 64).add_top_k(o.top_k).add_top_p(o.top_p).add_min_p(o.min_p).add_temperature(0);
    EXPECT_EQ(fast.sample(row), want) << "trial " << trial;
    EXPECT_EQ(list.sample(row), want) << "trial " << trial;
  }
}

// The abort callback is asked before every pass: aborting in the middle of
// a prompt cut into passes returns Cancelled and keeps none of its tokens,
// and the same prompt decoded afterwards gives the logits of a context that
// never aborted; generate() stops at the pass the callback refuses.
TEST_F(ContextTest, AbortCallbackStopsBetweenPassesAndKeepsNothing) {
  std::mt19937_64 rng(seed_);
  ModelOptions mo = host_options(2);
  mo.prefill_chunk = 4;  // 20 tokens: 5 passes
  auto model = Model::open(path_, mo);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  int asked = 0, refuse_at = 3;
  ContextOptions co;
  co.abort_callback = [&] { return ++asked == refuse_at; };
  auto ctx = (*model)->create_context(co);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  const std::vector<int32_t> prompt = random_tokens(rng, 20);
  Batch b;
  for (int i = 0; i < 20; ++i) b.add(prompt[i], i, 0, true);
  Status st = (*ctx)->decode(b);
  EXPECT_TRUE(st.IsCancelled()) << st.ToString();
  EXPECT_EQ(asked, 3);                   // asked before passes 1, 2 and 3; pass 3 never ran
  EXPECT_EQ((*ctx)->position(0), 0);     // the two passes that ran are undone
  EXPECT_TRUE((*ctx)->logits(0).empty());

  refuse_at = -1;
  auto again = one_pass_logits(**ctx, 0, prompt);
  EXPECT_EQ(asked, 3 + 5);
  auto clean = (*model)->create_context();
  ASSERT_TRUE(clean.ok());
  auto want = one_pass_logits(**clean, 0, prompt);
  ASSERT_EQ(again.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(again[i], want[i]) << "row " << i;

  asked = 0;
  refuse_at = 4;  // after the prompt's pass and two generated tokens' passes
  auto gen = (*ctx)->generate(std::vector<int32_t>{prompt[0]}, greedy(10, false));
  ASSERT_FALSE(gen.ok());
  EXPECT_TRUE(gen.status().IsCancelled()) << gen.status().ToString();
  EXPECT_EQ(asked, 4);
}


// Each generated token's logprob (and its top alternatives) is the
// log-softmax of the logits it was sampled from; the prompt's are those of
// one pass over it on a clean context.
TEST_F(ContextTest, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  std::mt19937_64 rng(seed_);
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, host_options(3)));
  LS_ASSERT_OK_AND_ASSIGN(auto ctx, model->create_context());
  const auto prompt = random_tokens(rng, 9);
  GenerateOptions g = greedy(6, true);
  g.sampling = {.temperature = 0.9f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = rng()};
  g.logprobs = 3;
  g.prompt_logprobs = true;
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult r, ctx->generate(prompt, g));
  const int V = model->n_vocab();
  ASSERT_EQ(r.logprobs.size(), 1u);
  ASSERT_EQ(r.logprobs[0].size(), r.generated[0].size());
  for (size_t j = 0; j < r.generated[0].size(); ++j) {
    const std::span<const float> row(r.logits.data() + j * V, V);
    const TokenLogprob& lp = r.logprobs[0][j];
    EXPECT_EQ(lp.token, r.generated[0][j]);
    EXPECT_NEAR(lp.logprob, testing::log_softmax_at(row, lp.token), 1e-5) << "token " << j;
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].first, static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    for (auto [id, v] : lp.top) EXPECT_NEAR(v, testing::log_softmax_at(row, id), 1e-5);
    EXPECT_GE(lp.top[0].second, lp.top[1].second);
  }
  LS_ASSERT_OK_AND_ASSIGN(auto clean, model->create_context());
  const auto rows = one_pass_logits(*clean, 0, prompt);
  ASSERT_EQ(r.prompt_logprobs.size(), prompt.size() - 1);
  for (size_t i = 1; i < prompt.size(); ++i) {
    EXPECT_EQ(r.prompt_logprobs[i - 1].token, prompt[i]);
    EXPECT_NEAR(r.prompt_logprobs[i - 1].logprob, testing::log_softmax_at(rows[i - 1], prompt[i]), 1e-5) << i;
  }
  // Prompt logprobs with nothing to generate (what evaluation harnesses ask).
  LS_ASSERT_OK_AND_ASSIGN(auto eval, model->create_context());
  g.max_tokens = 0;
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult e, eval->generate(prompt, g));
  ASSERT_EQ(e.prompt_logprobs.size(), prompt.size() - 1);
  EXPECT_NEAR(e.prompt_logprobs.back().logprob, r.prompt_logprobs.back().logprob, 1e-6);
  EXPECT_TRUE(e.generated[0].empty());
}

// A stop string ends the sequence before its first match, which is neither
// returned nor streamed, even when it spans tokens; the text streamed is
// the text returned.
TEST_F(ContextTest, StopStringsEndTheTextBeforeTheMatch) {
  std::mt19937_64 rng(seed_);
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, host_options(2)));
  const auto prompt = random_tokens(rng, 5);
  LS_ASSERT_OK_AND_ASSIGN(auto free_run, model->create_context());
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult all, free_run->generate(prompt, greedy(24, false)));
  const std::string text = all.text[0];
  EXPECT_EQ(all.finish[0], FinishReason::kLength);
  if (text.size() < 8) GTEST_SKIP() << "this random model produced only " << text.size() << " bytes";
  // A stop that starts inside one token's text and ends in a later one's.
  std::string piece_of_first;
  {
    std::vector<int32_t> first{all.generated[0][0]};
    piece_of_first = model->detokenize(first);
  }
  const size_t at = std::max<size_t>(1, piece_of_first.size()) - 1 + text.size() / 4;
  const std::string stop = text.substr(std::min(at, text.size() - 4), 4);
  const std::string want = text.substr(0, text.find(stop));
  GenerateOptions g = greedy(24, false);
  g.stop = {"\x01never", stop};
  LS_ASSERT_OK_AND_ASSIGN(auto ctx, model->create_context());
  std::string streamed;
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult r, ctx->generate(prompt, g, [&](const TokenEvent& e) {
    streamed += e.piece;
    return true;
  }));
  EXPECT_EQ(r.text[0], want) << "stop '" << stop << "' in '" << text << "'";
  EXPECT_EQ(streamed, want);
  EXPECT_EQ(r.finish[0], FinishReason::kStopString);
  EXPECT_LT(r.generated[0].size(), all.generated[0].size());
}

// Why each sequence stopped: length, a full context, an end-of-generation
// token (made certain with a logit bias), the callback.
TEST_F(ContextTest, FinishReasonsSayWhyEachSequenceStopped) {
  std::mt19937_64 rng(seed_);
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, host_options(4)));
  LS_ASSERT_OK_AND_ASSIGN(auto ctx, model->create_context());
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult len, ctx->generate(random_tokens(rng, 4), greedy(3, false)));
  EXPECT_EQ(len.finish[0], FinishReason::kLength);
  EXPECT_STREQ(finish_reason_name(len.finish[0]), "length");

  LS_ASSERT_OK_AND_ASSIGN(auto full, model->create_context());
  const int n_ctx = full->n_context();
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult f, full->generate(random_tokens(rng, n_ctx - 2), greedy(10, false)));
  EXPECT_EQ(f.finish[0], FinishReason::kContextFull);
  EXPECT_EQ(f.generated[0].size(), 3u);  // positions n-2 and n-1 decode two of them, the third stays pending

  LS_ASSERT_OK_AND_ASSIGN(auto eog, model->create_context());
  GenerateOptions g = greedy(10, false);
  g.stop_at_eog = true;
  g.sampling.logit_bias = {{model->token_eos(), 1e4f}};
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult e, eog->generate(random_tokens(rng, 4), g));
  EXPECT_EQ(e.finish[0], FinishReason::kEndOfGeneration);
  EXPECT_EQ(e.generated[0], std::vector<int32_t>{model->token_eos()});
  EXPECT_EQ(e.text[0], "");

  LS_ASSERT_OK_AND_ASSIGN(auto cb, model->create_context());
  LS_ASSERT_OK_AND_ASSIGN(GenerateResult c, cb->generate(random_tokens(rng, 4), greedy(10, false),
                                                          [](const TokenEvent&) { return false; }));
  EXPECT_EQ(c.finish[0], FinishReason::kCallback);
  EXPECT_EQ(c.generated[0].size(), 1u);
}

// Bad sampling values fail generate() before anything is decoded, naming
// the field; so do empty stop strings and a logprobs count out of range.
TEST_F(ContextTest, GenerateRefusesBadOptionsNamingThem) {
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(path_, host_options(1)));
  LS_ASSERT_OK_AND_ASSIGN(auto ctx, model->create_context());
  const std::vector<int32_t> prompt = {1, 2, 3};
  auto refuses = [&](GenerateOptions g, const std::string& says) {
    auto r = ctx->generate(prompt, g);
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_TRUE(r.status().IsInvalidArgument());
    EXPECT_THAT(r.status().message(), HasSubstr(says));
    EXPECT_EQ(ctx->position(0), 0);
  };
  GenerateOptions g = greedy(4, false);
  g.sampling.top_p = 1.5f;
  refuses(g, "top_p");
  g = greedy(4, false);
  g.sampling.repeat_penalty = 0;
  refuses(g, "repeat_penalty");
  g = greedy(4, false);
  g.sampling.logit_bias = {{model->n_vocab(), 1.0f}};
  refuses(g, "logit_bias");
  g = greedy(4, false);
  g.stop = {""};
  refuses(g, "stop");
  g = greedy(4, false);
  g.logprobs = -2;
  refuses(g, "logprobs");
}

// NaN logits are never picked, and they do not break the ranking, on both of
// the chain's paths (the greedy argmax and the candidate list) and when
// drawing; an all-NaN row gives token 0, as the CPU and CUDA argmax do.
TEST(SamplerChain, NaNLogitsAreNeverPicked) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {nan, 1.0f, 3.0f, nan, 2.0f};
  SamplerChain greedy = SamplerChain::from({.temperature = 0});
  EXPECT_EQ(greedy.sample(logits), 2);
  SamplerChain list(0);
  list.add_repetition_penalty(1.0f, 64).add_top_k(2).add_temperature(0);
  EXPECT_EQ(list.sample(logits), 2);
  std::mt19937_64 rng(testing::fresh_seed());
  SamplerChain draw = SamplerChain::from({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = rng()});
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < 600; ++i) ++counts[draw.sample(logits)];
  EXPECT_EQ(counts[0] + counts[3], 0);
  EXPECT_GT(counts[2], counts[4]);
  EXPECT_GT(counts[4], counts[1]);
  // A large row with NaNs scattered at random: top-k and top-p sort it.
  std::vector<float> row(4096);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (float& x : row) x = rng() % 4 == 0 ? nan : nd(rng);
  const int32_t want = static_cast<int32_t>(std::max_element(row.begin(), row.end(), [](float a, float b) {
                                              return std::isnan(a) || (!std::isnan(b) && a < b);
                                            }) - row.begin());
  EXPECT_EQ(SamplerChain::from({.temperature = 0}).sample(row), want);
  SamplerChain sorted = SamplerChain::from({.temperature = 0.7f, .top_k = 3000, .top_p = 0.9f, .seed = rng()});
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(std::isnan(row[sorted.sample(row)]));
  const std::vector<float> all_nan(7, nan);
  EXPECT_EQ(SamplerChain::from({.temperature = 0}).sample(all_nan), 0);
  EXPECT_EQ(SamplerChain::from({.temperature = 1.0f, .seed = 5}).sample(all_nan), 0);
}

TEST_F(ContextTest, MetadataIsEveryScalarKeyOfTheFileAsText) {
  auto model = Model::open(path_, host_options(1));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto file = read_gguf_file(path_);
  ASSERT_TRUE(file.ok());
  size_t scalars = 0;
  for (const GgufKeyValue& kv : file->metadata()) scalars += kv.value.is_array() ? 0 : 1;
  const auto& meta = (*model)->metadata();
  EXPECT_EQ(meta.size(), scalars);
  EXPECT_THAT(meta, ::testing::Contains(std::pair<std::string, std::string>("general.architecture", "llama")));
  const std::string layers = std::to_string((*model)->info().layers);
  EXPECT_THAT(meta, ::testing::Contains(std::pair<std::string, std::string>("llama.block_count", layers)));
  for (const auto& [key, text] : meta) EXPECT_NE(key.rfind("tokenizer.ggml.tokens", 0), 0u) << "arrays are left out";
}

}  // namespace
}  // namespace layerstream

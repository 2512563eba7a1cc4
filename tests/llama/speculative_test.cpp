// Speculative decoding (layerstream/speculative.h) on example models, host
// backend:
//  - a pass of up to kBatchInvariantTokens tokens gives each token the bits
//    of a one-token pass (what makes speculative greedy output exact);
//  - greedy identity: tokens with lookup drafts, a perfect draft (the model
//    itself: every draft kept) and a random draft sharing the vocabulary
//    (nearly every draft rejected) equal plain greedy tokens, with the
//    layers resident and streamed;
//  - rollback: after rejected drafts the KV cache holds exactly what plain
//    decoding leaves, so a second turn continues identically;
//  - sampling: with the same seed, speculation samples plain sampling's
//    tokens (so the model's distribution), where "keep every draft" would
//    not;
//  - the draft length chosen from measured costs: long where passes cost
//    the same whatever they carry, short where they grow with the tokens or
//    drafts are rejected;
//  - a draft with another vocabulary, bad draft_max, several sequences:
//    clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "layerstream/layerstream.h"
#include "runtime/llama/draft_length.h"
#include "runtime/model/example_model.h"
#include "tests/common/pass_invariance.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

using ::testing::HasSubstr;

// A verification pass carries the drafted chain; plain decoding carries one
// token. Each row of a pass of up to kernels::kBatchInvariantTokens tokens
// must equal the one-token pass bit for bit, on the fast (int8) and exact
// paths and every weight type, or speculative greedy output could differ
// from plain greedy output.
TEST(BatchInvariance, PassRowsEqualOneTokenPasses) {
  testing::TempDir dir;
  for (GgmlType ty : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1}) {
    const std::string path = dir.file("m.gguf");
    ASSERT_TRUE(testing::write_scratch_model(path, testing::tiny_llama_spec(ty, testing::fresh_seed(), 128)).ok());
    for (bool exact : {false, true}) {
      ModelOptions o;
      o.backend = Backend::kHost;
      o.host_threads = 2;
      o.context = 96;
      o.exact = exact;
      auto model = Model::open(path, o).value();
      const testing::PassInvariance r = testing::measure_pass_invariance(*model, testing::fresh_seed());
      EXPECT_EQ(r.rows_differing, 0) << ggml_type_name(static_cast<uint32_t>(ty)) << (exact ? " exact" : " fast")
                                     << ": max |diff| " << r.max_diff;
    }
  }
}


ModelOptions host_options() {
  ModelOptions o;
  o.backend = Backend::kHost;
  o.host_threads = 2;
  o.context = 128;
  o.sequences = 2 + 2;  // a plain and a speculative context side by side, and a tree's two side branches
  return o;
}

GenerateOptions greedy(int n) {
  GenerateOptions g;
  g.max_tokens = n;
  g.sampling.temperature = 0;
  g.stop_at_eog = false;
  return g;
}

// Prompts of random tokens; odd ones repeat a passage (lookup's case).
std::vector<std::vector<int32_t>> prompts(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p;
    for (int j = 0; j < 6 + i; ++j) p.push_back(static_cast<int32_t>(1 + rng() % 500));
    if (i % 2) p.insert(p.end(), p.begin(), p.end());
    out.push_back(p);
  }
  return out;
}

class SpeculativeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = testing::fresh_seed();
    target_ = dir_.file("target.gguf");
    draft_ = dir_.file("draft.gguf");
    ASSERT_TRUE(testing::write_scratch_model(target_, testing::tiny_llama_spec(GgmlType::Q4_1, seed_, 128)).ok());
    ASSERT_TRUE(testing::write_scratch_model(draft_, testing::tiny_llama_spec(GgmlType::Q8_0, seed_ + 1, 128)).ok());
  }

  // The model resident, or streamed: the least budget that opens (in steps
  // of 64 KiB), where the window holds a layer or two.
  std::shared_ptr<Model> open_target(bool streamed) {
    ModelOptions o = host_options();
    o.strategy = streamed ? Strategy::kOverlap : Strategy::kResident;
    for (uint64_t budget = 512 << 10;; budget += 64 << 10) {
      if (streamed) o.vram_budget = budget;
      auto m = Model::open(target_, o);
      if (m.ok()) return *m;
      if (!streamed || m.status().code() != StatusCode::kOutOfBudget || budget > (64ull << 20)) {
        ADD_FAILURE() << m.status().ToString();
        return nullptr;
      }
    }
  }

  // Greedy tokens of each prompt, plain and with `draft`; expects them equal.
  // Returns the speculative figures summed over the prompts.
  SpeculativeStats expect_identical(Model& model, const std::shared_ptr<DraftSource>& draft, int n_prompts,
                                    bool adaptive = true, int branches = 1) {
    SpeculativeStats sum;
    for (const auto& prompt : prompts(seed_, n_prompts)) {
      auto plain_ctx = model.create_context().value();
      auto spec_ctx = model.create_context().value();
      const GenerateResult plain = plain_ctx->generate(prompt, greedy(24)).value();
      GenerateOptions so = greedy(24);
      so.speculative.draft = draft;
      so.speculative.adaptive = adaptive;
      so.speculative.branches = branches;
      so.speculative.draft_max = std::min(kMaxDraftTokens, kMaxDraftTokens + 1 - branches);
      const GenerateResult spec = spec_ctx->generate(prompt, so).value();
      EXPECT_EQ(spec.generated[0], plain.generated[0]) << "prompt of " << prompt.size() << " tokens";
      EXPECT_EQ(spec_ctx->position(0), plain_ctx->position(0));
      EXPECT_EQ(spec.stats.bytes_streamed_per_pass > 0, plain.stats.bytes_streamed_per_pass > 0);
      const SpeculativeStats& s = spec.stats.speculative;
      EXPECT_EQ(s.tokens, static_cast<int>(plain.generated[0].size()) - 1) << "tokens after the first";
      EXPECT_LE(s.passes, s.tokens);
      sum.passes += s.passes;
      sum.tokens += s.tokens;
      sum.drafted += s.drafted;
      sum.accepted += s.accepted;
      sum.pass_tokens += s.pass_tokens;
      sum.branches += s.branches;
      sum.side_branch_kept += s.side_branch_kept;
    }
    EXPECT_EQ(model.free_sequences(), model.options().sequences) << "side branches' sequences given back";
    return sum;
  }

  // The model as its own draft (a second copy, resident, decoding one token
  // per pass): its first guess is always the model's greedy token.
  std::shared_ptr<DraftSource> self_draft(const Model& model) {
    auto self = Model::open(target_, host_options());
    if (!self.ok()) return nullptr;
    auto draft = make_model_draft(*self, model);
    return draft.ok() ? std::shared_ptr<DraftSource>(std::move(*draft)) : nullptr;
  }

  uint64_t seed_ = 0;
  testing::TempDir dir_;
  std::string target_, draft_;
};

TEST_F(SpeculativeTest, LookupGivesPlainGreedyTokens) {
  for (bool streamed : {false, true}) {
    SCOPED_TRACE(streamed ? "streamed" : "resident");
    auto model = open_target(streamed);
    ASSERT_TRUE(model);
    EXPECT_EQ(model->placement().rfind("0 resident", 0) == 0, streamed) << model->placement();
    LS_ASSERT_OK_AND_ASSIGN(std::shared_ptr<DraftSource> lookup, make_lookup_draft());
    const SpeculativeStats s = expect_identical(*model, lookup, 6);
    EXPECT_GT(s.drafted, 0) << "the repeated passages give lookup something to draft";
  }
}

TEST_F(SpeculativeTest, DraftModelGivesPlainGreedyTokens) {
  for (bool streamed : {false, true}) {
    SCOPED_TRACE(streamed ? "streamed" : "resident");
    auto model = open_target(streamed);
    ASSERT_TRUE(model);
    // The model as its own draft: every draft is the model's greedy token
    // (computed one token per pass), so every one is kept.
    LS_ASSERT_OK_AND_ASSIGN(auto self, Model::open(target_, host_options()));
    LS_ASSERT_OK_AND_ASSIGN(std::shared_ptr<DraftSource> perfect, make_model_draft(self, *model));
    const SpeculativeStats p = expect_identical(*model, perfect, 4, /*adaptive=*/false);
    EXPECT_GT(p.drafted, 0);
    EXPECT_EQ(p.accepted, p.drafted);
    EXPECT_LT(p.passes * 4, p.tokens) << "more than 4 tokens per pass with 7 drafts all kept";

    // A random model with the same vocabulary: drafts almost never kept.
    LS_ASSERT_OK_AND_ASSIGN(auto other, Model::open(draft_, host_options()));
    LS_ASSERT_OK_AND_ASSIGN(std::shared_ptr<DraftSource> random, make_model_draft(other, *model));
    const SpeculativeStats r = expect_identical(*model, random, 4);
    EXPECT_GT(r.drafted, 0);
    EXPECT_LT(r.accepted * 5, r.drafted) << "a random draft agrees rarely";
  }
}

// Rejected drafts leave their KV entries behind unless rolled back; a second
// turn would then attend to them. It must continue as plain decoding does.
TEST_F(SpeculativeTest, RollbackLeavesThePlainKvCache) {
  auto model = open_target(false);
  ASSERT_TRUE(model);
  LS_ASSERT_OK_AND_ASSIGN(auto other, Model::open(draft_, host_options()));
  LS_ASSERT_OK_AND_ASSIGN(std::shared_ptr<DraftSource> random, make_model_draft(other, *model));
  const auto ps = prompts(seed_ + 2, 2);
  auto plain = model->create_context().value();
  auto spec = model->create_context().value();
  GenerateOptions so = greedy(16);
  so.speculative.draft = random;
  so.keep_logits = true;
  GenerateOptions po = greedy(16);
  po.keep_logits = true;
  for (const auto& turn : ps) {
    const GenerateResult a = plain->generate(turn, po).value();
    const GenerateResult b = spec->generate(turn, so).value();
    EXPECT_EQ(b.generated[0], a.generated[0]);
    EXPECT_EQ(b.logits, a.logits) << "every sampled row, bit for bit";
    EXPECT_EQ(spec->position(0), plain->position(0));
    EXPECT_GT(b.stats.speculative.drafted, b.stats.speculative.accepted) << "some drafts were rolled back";
  }
}

// The 3 tokens sampled (temperature 1, top-2) with each of seeds 0..n-1.
std::vector<std::vector<int32_t>> samples(Context& ctx, const std::vector<int32_t>& prompt, int n,
                                          const std::shared_ptr<DraftSource>& draft) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(ctx.clear().ok());
    GenerateOptions g;
    g.max_tokens = 3;
    g.stop_at_eog = false;
    g.sampling.temperature = 1.0f;
    g.sampling.top_k = 2;
    g.sampling.seed = static_cast<uint64_t>(i) * 7919 + 1;
    g.speculative.draft = draft;
    out.push_back(ctx.generate(prompt, g).value().generated[0]);
  }
  return out;
}

// Sampling: each row of a verification pass has plain decoding's bits and
// the sampler draws once per token in order, so with the same seed the
// speculative tokens are plain sampling's tokens (which implies the
// distribution is the model's). A rule that keeps drafts the model's draw
// does not agree with ("keep every draft") gives other tokens: the samples
// must include such cases, or the check would prove nothing.
TEST_F(SpeculativeTest, SamplingDrawsPlainSamplingsTokens) {
  constexpr int kSamples = 200;
  ModelOptions o = host_options();
  o.host_threads = 1;
  o.strategy = Strategy::kResident;
  LS_ASSERT_OK_AND_ASSIGN(auto model, Model::open(target_, o));
  LS_ASSERT_OK_AND_ASSIGN(auto self, Model::open(target_, o));
  // The model as its own greedy draft: every draft is the likeliest token.
  LS_ASSERT_OK_AND_ASSIGN(std::shared_ptr<DraftSource> draft, make_model_draft(self, *model));
  auto ctx = model->create_context().value();
  const std::vector<int32_t> prompt = prompts(seed_, 1)[0];
  const auto plain = samples(*ctx, prompt, kSamples, nullptr);
  EXPECT_EQ(samples(*ctx, prompt, kSamples, draft), plain);

  int not_greedy = 0;  // samples that "keep every draft" would have changed
  for (const auto& seq : plain) {
    std::vector<int32_t> first = prompt;
    first.push_back(seq[0]);
    ASSERT_TRUE(ctx->clear().ok());
    const GenerateResult g = ctx->generate(first, greedy(2)).value();
    not_greedy += std::vector<int32_t>(seq.begin() + 1, seq.end()) != g.generated[0];
  }
  EXPECT_GT(not_greedy, kSamples / 10) << "top-2 at temperature 1 leaves the greedy path often";
}

// DraftLength on synthetic measurements: pass_ms(n) for n tokens, the
// draft's ms per token, and the share kept at every depth.
int chosen(double pass_fixed_ms, double pass_per_token_ms, double draft_ms, double kept) {
  DraftLength length(kMaxDraftTokens);
  EXPECT_EQ(length.choose(), kMaxDraftTokens) << "nothing measured: the cap";
  double owed = 0;  // kept outcomes spread evenly (error diffusion), so the averages settle near `kept`
  for (int round = 0; round < 50; ++round) {
    for (int n = 1; n <= kMaxDraftTokens + 1; n += 3)
      length.record_pass(n, (pass_fixed_ms + pass_per_token_ms * n) * 1e-3);
    length.record_draft(4, 4 * draft_ms * 1e-3);
    owed += kept;
    const bool keep = owed >= 1;
    owed -= keep;
    for (int d = 0; d < kMaxDraftTokens; ++d) length.record_depth(d, keep);
  }
  return length.choose();
}

TEST(DraftLengthTest, ChoosesFromMeasuredCosts) {
  // Streamed: a pass is bytes / link whatever it carries, drafts are cheap.
  EXPECT_EQ(chosen(60, 0, 1, 0.9), kMaxDraftTokens);
  // Compute-bound passes and a costly, often wrong draft: one draft.
  EXPECT_EQ(chosen(10, 10, 5, 0.5), 1);
  // Flat passes but every draft rejected: each extra draft only costs.
  EXPECT_EQ(chosen(60, 0, 1, 0.0), 1);
  // In between: a middle length.
  const int mid = chosen(20, 3, 2, 0.7);
  EXPECT_GT(mid, 1);
  EXPECT_LT(mid, kMaxDraftTokens);
}

// A draft whose first guess for the next token is always wrong (the
// perfect draft's token + 1) and whose second guess is the model's greedy
// path: as a chain nothing it drafts is kept; as a tree of two branches the
// side branch is kept, and its KV cache becomes the sequence's.
class SecondGuessDraft final : public DraftSource {
 public:
  SecondGuessDraft(std::shared_ptr<DraftSource> perfect, int32_t n_vocab)
      : perfect_(std::move(perfect)), n_vocab_(n_vocab) {}
  Result<std::vector<int32_t>> propose(int first_position, std::span<const int32_t> tokens,
                                       int max_tokens) override {
    auto chain = perfect_->propose(first_position, tokens, max_tokens);
    if (chain.ok() && !chain->empty()) (*chain)[0] = ((*chain)[0] + 1) % n_vocab_;
    return chain;
  }
  Result<std::vector<std::vector<int32_t>>> propose_tree(int first_position, std::span<const int32_t> tokens,
                                                         std::span<const int> lengths) override {
    if (lengths.empty()) return perfect_->propose_tree(first_position, tokens, lengths);  // records the tokens
    std::vector<std::vector<int32_t>> tree;
    for (size_t r = 0; r < lengths.size() && r < 2; ++r) {
      auto b = r == 0 ? propose(first_position, tokens, lengths[r]) : perfect_->propose(first_position, tokens, lengths[r]);
      if (!b.ok()) return b.status();
      tree.push_back(*b);
    }
    return tree;
  }
  std::string name() const override { return "second guess"; }

 private:
  std::shared_ptr<DraftSource> perfect_;
  int32_t n_vocab_;
};

TEST_F(SpeculativeTest, TreesGivePlainGreedyTokensAndKeepSideBranches) {
  for (bool streamed : {false, true}) {
    SCOPED_TRACE(streamed ? "streamed" : "resident");
    auto model = open_target(streamed);
    ASSERT_TRUE(model);
    const std::shared_ptr<DraftSource> perfect = self_draft(*model);
    ASSERT_TRUE(perfect);
    auto second = std::make_shared<SecondGuessDraft>(perfect, model->n_vocab());
    const SpeculativeStats chain = expect_identical(*model, second, 3, /*adaptive=*/false, /*branches=*/1);
    const SpeculativeStats tree = expect_identical(*model, second, 3, /*adaptive=*/false, /*branches=*/2);
    EXPECT_EQ(chain.accepted, 0) << "the first guess is never the model's token";
    EXPECT_EQ(chain.tokens, chain.passes);
    EXPECT_GT(tree.side_branch_kept, tree.passes / 2);
    EXPECT_GT(tree.tokens_per_pass(), 2.5) << "the shape learns that the side branch is kept";
    EXPECT_LE(tree.pass_tokens, 8 * tree.passes);

    // Trees of the real sources: the model's top alternatives, several
    // earlier occurrences; a random draft (alternatives rarely kept).
    LS_ASSERT_OK_AND_ASSIGN(std::shared_ptr<DraftSource> lookup, make_lookup_draft());
    const SpeculativeStats l = expect_identical(*model, lookup, 6, /*adaptive=*/false, /*branches=*/3);
    EXPECT_GT(l.drafted, 0);
    LS_ASSERT_OK_AND_ASSIGN(auto other, Model::open(draft_, host_options()));
    LS_ASSERT_OK_AND_ASSIGN(std::shared_ptr<DraftSource> random, make_model_draft(other, *model));
    const SpeculativeStats r = expect_identical(*model, random, 3, /*adaptive=*/false, /*branches=*/3);
    EXPECT_GT(r.drafted, 0);
    const SpeculativeStats p = expect_identical(*model, perfect, 2, /*adaptive=*/true, /*branches=*/2);
    EXPECT_EQ(p.accepted, p.drafted) << "the first branch is the model's path";
  }
}

// After passes that kept a side branch (its sequence slot swapped in for
// the context's), the KV cache must be plain decoding's: a second turn
// continues identically, logits bit for bit, and the pool gets its
// sequences back.
TEST_F(SpeculativeTest, TreeRollbackLeavesThePlainKvCache) {
  auto model = open_target(false);
  ASSERT_TRUE(model);
  const std::shared_ptr<DraftSource> perfect = self_draft(*model);
  ASSERT_TRUE(perfect);
  auto second = std::make_shared<SecondGuessDraft>(perfect, model->n_vocab());
  auto plain = model->create_context().value();
  auto spec = model->create_context().value();
  GenerateOptions so = greedy(16);
  so.speculative.draft = second;
  so.speculative.branches = 3;
  so.speculative.draft_max = 5;
  so.speculative.adaptive = false;
  so.keep_logits = true;
  GenerateOptions po = greedy(16);
  po.keep_logits = true;
  for (const auto& turn : prompts(seed_ + 3, 2)) {
    const GenerateResult a = plain->generate(turn, po).value();
    const GenerateResult b = spec->generate(turn, so).value();
    EXPECT_EQ(b.generated[0], a.generated[0]);
    EXPECT_EQ(b.logits, a.logits) << "every sampled row, bit for bit";
    EXPECT_EQ(spec->position(0), plain->position(0));
    EXPECT_GT(b.stats.speculative.side_branch_kept, 0);
    EXPECT_EQ(model->free_sequences(), model->options().sequences - 2);
  }
}

// Sampling with trees: the draw from the sampled token's row picks the
// branch, so with the same seed the tokens are plain sampling's; at
// temperature 1 over the top 2 the draw is often the draft's second token,
// which a side branch then holds.
TEST_F(SpeculativeTest, TreeSamplingDrawsPlainSamplingsTokens) {
  constexpr int kSamples = 100;
  auto model = open_target(false);
  ASSERT_TRUE(model);
  const std::shared_ptr<DraftSource> draft = self_draft(*model);
  ASSERT_TRUE(draft);
  auto ctx = model->create_context().value();
  const std::vector<int32_t> prompt = prompts(seed_ + 4, 1)[0];
  int side_kept = 0;
  for (int i = 0; i < kSamples; ++i) {
    GenerateOptions g = greedy(4);  // then sampled: temperature 1 over the top 2
    g.sampling = {.temperature = 1.0f, .top_k = 2, .seed = static_cast<uint64_t>(i) * 104729 + 3};
    ASSERT_TRUE(ctx->clear().ok());
    const std::vector<int32_t> plain = ctx->generate(prompt, g).value().generated[0];
    g.speculative.draft = draft;
    g.speculative.branches = 2;
    g.speculative.draft_max = 4;
    g.speculative.adaptive = false;
    ASSERT_TRUE(ctx->clear().ok());
    const GenerateResult tree = ctx->generate(prompt, g).value();
    EXPECT_EQ(tree.generated[0], plain) << "seed " << g.sampling.seed;
    side_kept += tree.stats.speculative.side_branch_kept;
  }
  EXPECT_GT(side_kept, kSamples / 10) << "draws that only a side branch held";
}

// Tree shapes on synthetic measurements: flat passes; the first draft kept
// with probability `first`, an alternative first token (after the ones
// before it missed) with `alternative`, deeper drafts with `deeper`.
DraftLength measured_tree(double first, double alternative, double deeper) {
  DraftLength length(6, 2, kMaxDraftTokens + 1);
  double owed[3] = {0, 0, 0};  // error diffusion, as in chosen()
  const auto outcome = [&](int i, double p) {
    owed[i] += p;
    const bool keep = owed[i] >= 1;
    owed[i] -= keep;
    return keep;
  };
  for (int round = 0; round < 60; ++round) {
    for (int n = 1; n <= kMaxDraftTokens + 1; ++n) length.record_pass(n, 60e-3);
    length.record_draft(4, 4e-3);
    length.record_depth(0, outcome(0, first));
    length.record_alternative(1, outcome(1, alternative));
    const bool deep = outcome(2, deeper);
    for (int d = 1; d < 6; ++d) length.record_depth(d, deep);
  }
  return length;
}
std::vector<int> chosen_tree(double first, double alternative, double deeper) {
  return measured_tree(first, alternative, deeper).choose_tree();
}

TEST(DraftLengthTest, ChoosesATreeWhereItPays) {
  // A strong draft: every chain position pays more than a second guess.
  EXPECT_EQ(chosen_tree(0.9, 0.3, 0.9), std::vector<int>{6});
  // First guesses often wrong, second guesses often right, deeper drafts
  // good: two branches.
  const std::vector<int> tree = chosen_tree(0.4, 0.7, 0.9);
  ASSERT_EQ(tree.size(), 2u);
  EXPECT_LE(tree[0] + tree[1], 6);
  EXPECT_GT(tree[1], 1);
  DraftLength length(6, 2, kMaxDraftTokens + 1);
  EXPECT_EQ(length.choose_tree(), std::vector<int>{6}) << "nothing measured: the cap as a chain";
  // A fixed budget of 6 drafts: the shape that keeps the most.
  EXPECT_EQ(measured_tree(0.9, 0.3, 0.9).most_kept(6), std::vector<int>{6});
  const std::vector<int> second_guess = measured_tree(0.0, 1.0, 1.0).most_kept(6);
  EXPECT_EQ(second_guess, (std::vector<int>{1, 5})) << "the first guess never kept: one draft there, the rest on the second";
}

TEST_F(SpeculativeTest, BadDraftsAndOptionsAreRefused) {
  const std::string other_vocab = dir_.file("v640.gguf");
  ExampleModelSpec spec = testing::tiny_llama_spec(GgmlType::F32, seed_, 128);
  spec.n_vocab = 640;
  ASSERT_TRUE(testing::write_scratch_model(other_vocab, spec).ok());
  auto model = open_target(false);
  ASSERT_TRUE(model);
  LS_ASSERT_OK_AND_ASSIGN(auto wrong, Model::open(other_vocab, host_options()));
  auto refused = make_model_draft(wrong, *model);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("640 tokens"));
  EXPECT_THAT(refused.status().message(), HasSubstr("same vocabulary"));

  LS_ASSERT_OK_AND_ASSIGN(std::shared_ptr<DraftSource> lookup, make_lookup_draft());
  auto ctx = model->create_context().value();
  GenerateOptions o = greedy(4);
  o.speculative.draft = lookup;
  o.speculative.draft_max = kMaxDraftTokens + 1;
  auto r = ctx->generate(std::vector<int32_t>{1, 2, 3}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("draft_max"));
  EXPECT_EQ(ctx->position(0), 0) << "nothing decoded";
  EXPECT_FALSE(make_lookup_draft({.min_ngram = 0, .max_ngram = 2}).ok());
  o.speculative.draft_max = 7;
  o.speculative.branches = 2;
  r = ctx->generate(std::vector<int32_t>{1, 2, 3}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("draft_max + branches"));
  o.speculative.draft_max = 3;
  o.speculative.branches = kMaxDraftBranches + 1;
  r = ctx->generate(std::vector<int32_t>{1, 2, 3}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("branches must be in"));
  {  // a pool with no sequence to spare for a side branch
    ModelOptions one = host_options();
    one.sequences = 1;
    LS_ASSERT_OK_AND_ASSIGN(auto single, Model::open(target_, one));
    auto only = single->create_context().value();
    o.speculative.branches = 2;
    auto full = only->generate(std::vector<int32_t>{1, 2, 3}, o);
    ASSERT_FALSE(full.ok());
    EXPECT_EQ(full.status().code(), StatusCode::kOutOfBudget);
    EXPECT_THAT(full.status().message(), HasSubstr("free KV sequences"));
    EXPECT_EQ(only->position(0), 0) << "nothing decoded";
  }
  o.speculative.branches = 1;

  ctx.reset();  // its sequence back to the pool
  LS_ASSERT_OK_AND_ASSIGN(auto pair, model->create_context({.sequences = 2}));
  o.speculative.draft_max = 3;
  auto two = pair->generate(std::vector<int32_t>{1, 2, 3}, o);
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(two.status().message(), HasSubstr("one sequence"));
}

}  // namespace
}  // namespace layerstream

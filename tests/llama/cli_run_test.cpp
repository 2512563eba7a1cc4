// `layerstream run` end to end: example-model tiny -> run --tokens -n 5
// --temp 0 --json --logits; and bad input exits non-zero with "error:".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <span>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/grammar/grammar_compiler.h"
#include "tests/common/cli.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

using testing::CliResult;
using testing::run_cli;

TEST(CliRun, TokensJsonLogits) {
  TempDir dir;
  const std::string model = dir.file("tiny.gguf");
  const uint64_t seed = testing::fresh_seed() % 1000000;
  ASSERT_TRUE(testing::cli_example_model(
      model, "--layers 4 --hidden 64 --ffn 128 --heads 4 --kv-heads 2 --dtype f16 --seed " + std::to_string(seed)));
  const std::string json = dir.file("r.json"), npy = dir.file("l.npy");
  CliResult r = run_cli("run " + model + " --tokens 1,17,42,99 -n 5 --ignore-eog --temp 0 --backend host --vram 512KiB "
                            "--ctx 64 --logprobs 2 --json " + json + " --logits " + npy);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("overlap efficiency"));
  EXPECT_THAT(r.out, HasSubstr("disk"));

  std::ifstream jf(json);
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["prompt_tokens"], nlohmann::json({1, 17, 42, 99}));
  ASSERT_EQ(j["generated_tokens"].size(), 5u);
  for (const auto& t : j["generated_tokens"]) EXPECT_TRUE(t.get<int>() >= 0 && t.get<int>() < 512);
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["layers"]["disk"].get<int>() + j["layers"]["ram"].get<int>(), 0);

  const std::vector<uint8_t> b = testing::read_file(npy);
  ASSERT_GT(b.size(), 10u);
  ASSERT_EQ(0, std::memcmp(b.data(), "\x93NUMPY\x01\x00", 8));
  const size_t hlen = b[8] | (b[9] << 8);
  const std::string header(b.begin() + 10, b.begin() + 10 + hlen);
  EXPECT_THAT(header, HasSubstr("'descr': '<f4'"));
  EXPECT_THAT(header, HasSubstr("'shape': (5, 512)"));
  EXPECT_EQ((10 + hlen) % 64, 0u);
  ASSERT_EQ(b.size(), 10 + hlen + 5 * 512 * sizeof(float));
  // Greedy: each generated token is the argmax of its row.
  const float* logits = reinterpret_cast<const float*>(b.data() + 10 + hlen);
  for (int row = 0; row < 5; ++row) {
    const float* l = logits + row * 512;
    int arg = 0;
    for (int i = 1; i < 512; ++i)
      if (l[i] > l[arg]) arg = i;
    EXPECT_EQ(arg, j["generated_tokens"][row].get<int>()) << "row " << row;
    EXPECT_TRUE(std::isfinite(l[0]));
    // --logprobs: the log-softmax of the same row, within 1e-4.
    const std::span<const float> row_span(l, 512);
    const nlohmann::json& lp = j["logprobs"][0][row];
    EXPECT_EQ(lp["token"], j["generated_tokens"][row]);
    EXPECT_NEAR(lp["logprob"].get<double>(), testing::log_softmax_at(row_span, arg), 1e-4) << "row " << row;
    ASSERT_EQ(lp["top"].size(), 2u);
    EXPECT_EQ(lp["top"][0][0].get<int>(), arg);
    const int second = lp["top"][1][0].get<int>();
    EXPECT_NEAR(lp["top"][1][1].get<double>(), testing::log_softmax_at(row_span, second), 1e-4) << "row " << row;
  }
  EXPECT_EQ(j["finish_reason"], nlohmann::json({"length"}));
  EXPECT_EQ(j["seeds"].size(), 1u);
  // Deterministic: a second run (everything resident) gives the same tokens.
  const std::string json2 = dir.file("r2.json");
  // Repeatable flags before the model take one value each (a stop that never
  // matches, a bias of 0): the same tokens.
  CliResult r2 = run_cli("run --stop NEVERSEEN -l 3+0 " + model + " --tokens 1,17,42,99 -n 5 --temp 0 --backend host --ctx 64 "
                             "--strategy resident --json " + json2);
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  std::ifstream jf2(json2);
  EXPECT_EQ(nlohmann::json::parse(jf2)["generated_tokens"], j["generated_tokens"]);
}

// `run --lookup` / `run --draft` (a chain, and a tree of 3 branches): the
// greedy tokens of plain decoding, and the speculative figures in --json.
TEST(CliRun, SpeculativeGivesPlainTokensAndFigures) {
  TempDir dir;
  const std::string model = dir.file("tiny.gguf");
  const uint64_t seed = testing::fresh_seed() % 1000000;
  ASSERT_TRUE(testing::cli_example_model(
      model, "--layers 2 --hidden 64 --ffn 128 --heads 4 --kv-heads 2 --dtype q8_0 --seed " + std::to_string(seed)));
  const std::string common = " --tokens 5,17,42,99,7,5,17,42,99,7,5,17 -n 12 --ignore-eog --temp 0 --backend host "
                             "--ctx 64 --json ";
  std::vector<nlohmann::json> out;
  for (const std::string& extra : {std::string(), std::string(" --lookup"), " --draft " + model + " --draft-max 3",
                                   " --draft " + model + " --draft-max 5 --draft-branches 3 --draft-fixed"}) {
    const std::string json = dir.file("r" + std::to_string(out.size()) + ".json");
    CliResult r = run_cli("run " + model + common + json + extra);
    ASSERT_EQ(r.exit_code, 0) << extra << r.out << r.err;
    std::ifstream jf(json);
    out.push_back(nlohmann::json::parse(jf));
    if (!extra.empty()) EXPECT_THAT(r.out, HasSubstr("tokens/pass")) << extra;
  }
  for (size_t i = 1; i < out.size(); ++i) {
    EXPECT_EQ(out[i]["generated_tokens"], out[0]["generated_tokens"]) << "run " << i;
    const nlohmann::json& s = out[i]["speculative"];
    EXPECT_EQ(s["tokens"].get<int>(), 11) << "every token after the first came from a verification pass";
    EXPECT_LE(s["passes"].get<int>(), 11);
    EXPECT_GE(s["drafted"].get<int>(), s["accepted"].get<int>());
  }
  EXPECT_EQ(out[2]["speculative"]["accepted"], out[2]["speculative"]["drafted"]) << "the model as its own draft";
  EXPECT_EQ(out[2]["speculative"]["drafted_at_depth"].size(), 3u);
  EXPECT_EQ(out[3]["speculative"]["accepted"], out[3]["speculative"]["drafted"]) << "a tree's first branch: the model's";
  EXPECT_GE(out[3]["speculative"]["mean_branches"].get<double>(), 1.0);
  EXPECT_LE(out[3]["speculative"]["pass_tokens"].get<int>(), 8 * out[3]["speculative"]["passes"].get<int>());
  EXPECT_FALSE(out[0].contains("speculative"));
}

// --json-schema / --grammar: at temperature 1 the example model's noise is
// held to what the file allows; a missing file or both flags are errors.
TEST(CliRun, JsonSchemaAndGrammarFilesConstrainTheOutput) {
  TempDir dir;
  const std::string model = dir.file("tiny.gguf");
  ASSERT_TRUE(testing::cli_example_model(model, "--layers 2 --hidden 64 --ffn 128 --heads 4 --kv-heads 2 --seed " +
                                                    std::to_string(testing::fresh_seed() % 1000000)));
  const std::string schema = dir.file("s.json"), grammar = dir.file("g.gbnf"), json = dir.file("r.json");
  std::ofstream(schema) << R"({"type":"object","properties":{"k":{"enum":["a","b"]}},"required":["k"]})";
  std::ofstream(grammar) << "root ::= (\"yes\" | \"no\") \"!\"\n";
  const std::string common = " -p hello -n 120 --temp 1 --seed 5 --backend host --ctx 256 --json " + json;
  if (!grammar::structured_output_available()) {
    CliResult r = run_cli("run " + model + common + " --json-schema " + schema);
    EXPECT_NE(r.exit_code, 0);
    GTEST_SKIP() << "built without the grammar engine: checked the error only";
  }
  CliResult r = run_cli("run " + model + common + " --json-schema " + schema);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json out = nlohmann::json::parse(std::ifstream(json));
  const nlohmann::json value = nlohmann::json::parse(out["text"][0].get<std::string>(), nullptr, false);
  EXPECT_TRUE(value == nlohmann::json({{"k", "a"}}) || value == nlohmann::json({{"k", "b"}})) << out["text"];

  CliResult g = run_cli("run " + model + common + " --grammar " + grammar);
  ASSERT_EQ(g.exit_code, 0) << g.out << g.err;
  const std::string text = nlohmann::json::parse(std::ifstream(json))["text"][0];
  EXPECT_TRUE(text == "yes!" || text == "no!") << text;

  CliResult missing = run_cli("run " + model + common + " --grammar " + dir.file("none.gbnf"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.err, HasSubstr("--grammar"));
  CliResult both = run_cli("run " + model + common + " --grammar " + grammar + " --json-schema " + schema);
  EXPECT_NE(both.exit_code, 0);
  EXPECT_THAT(both.err, HasSubstr("at most one"));
}

TEST(CliRun, BadInputExitsWithError) {
  TempDir dir;
  const std::string model = dir.file("tiny.gguf");
  ASSERT_TRUE(testing::cli_example_model(model, "--layers 2 --hidden 64 --ffn 128 --heads 4 --kv-heads 2"));
  struct Case {
    std::string args, words;
  };
  const std::vector<Case> cases = {
      {"run " + model + " --tokens 1,2,3,4,5,6,7,8,9 --ctx 8 --backend host", "longer than the context"},
      {"run " + model + " --tokens 1,2 --vram 64KiB --backend host", "cannot hold the KV cache"},
      {"run " + dir.file("missing.gguf") + " --tokens 1,2", "missing.gguf"},
      {"run " + model + " --tokens 1,x", "not a token id"},
      {"run " + model + " --tokens 1,100000 --backend host", "outside the vocabulary"},
      {"run " + model + " --tokens 1,2 --lookup --draft-max 9 --backend host", "--draft-max"},
      {"run " + model + " --tokens 1,2 --lookup --draft " + model + " --backend host", "one of --draft"},
      {"run " + model + " --tokens 1,2 --top-p 1.5", "--top-p: top_p is 1.5; it must be in (0, 1]"},
      {"run " + model + " --tokens 1,2 --repeat-penalty 0", "--repeat-penalty"},
      {"run " + model + " --tokens 1,2 --repeat-last-n -5", "--repeat-last-n"},
      {"run " + model + " --tokens 1,2 --logit-bias 5x", "--logit-bias: '5x'"},
      {"run " + model + " --tokens 1,2 --logit-bias 100000+1 --backend host", "outside the vocabulary"},
  };
  for (const Case& c : cases) {
    CliResult r = run_cli(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_THAT(r.err, HasSubstr("error:")) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.words)) << c.args;
  }
}

// `layerstream perplexity` end to end on a tiny gemma3 model: per-window
// figures and the JSON key "perplexity"; streamed under a small --vram the
// figure is the same; a text too short for two windows is a clear error.
TEST(CliPerplexity, ResidentStreamedJsonAndShortText) {
  TempDir dir;
  const std::string model = dir.file("tiny.gguf"), text = dir.file("text.txt");
  const uint64_t seed = testing::fresh_seed() % 1000000;
  ASSERT_TRUE(testing::cli_example_model(model,
                                         "--layers 4 --hidden 64 --ffn 128 --heads 4 --kv-heads 2 --arch gemma3 "
                                         "--head-dim 32 --sliding-window 8 --dtype f16 --seed " + std::to_string(seed)));
  {
    std::ofstream f(text);
    for (int i = 0; i < 40; ++i) f << "The quick brown fox " << i << " jumps over the lazy dog.\n";
  }
  double ppl[2] = {0, 0};
  // 500KiB: the reserve and 1 of the 5 layers resident, 4 streamed (the
  // embedding is gathered per pass, never a layer, since engine v2).
  const char* budgets[2] = {"", " --vram 500KiB"};
  for (int k = 0; k < 2; ++k) {
    const std::string json = dir.file("p" + std::to_string(k) + ".json");
    CliResult r = run_cli("perplexity " + model + " -f " + text + " --ctx 32 --chunks 2 --prefill-chunk 8 --backend host" +
                          budgets[k] + " --json " + json);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("[1]"));
    EXPECT_THAT(r.out, HasSubstr("[2]"));
    EXPECT_THAT(r.out, HasSubstr("Final estimate: PPL = "));
    std::ifstream jf(json);
    const nlohmann::json j = nlohmann::json::parse(jf);
    ppl[k] = j["perplexity"].get<double>();
    EXPECT_GT(ppl[k], 1.0);
    EXPECT_EQ(j["chunks"], 2);
    EXPECT_EQ(j["ctx"], 32);
    EXPECT_EQ(j["scored_tokens"], 2 * (32 - 1 - 16));
    ASSERT_EQ(j["per_chunk"].size(), 2u);
    if (k == 1) EXPECT_GT(j["streamed_bytes_per_pass"].get<uint64_t>(), 0u) << j.dump();
  }
  EXPECT_EQ(ppl[0], ppl[1]) << "streaming changed the perplexity";

  CliResult bad = run_cli("perplexity " + model + " -f " + text + " --ctx 4096 --backend host");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("error:"));
  EXPECT_THAT(bad.err, HasSubstr("needs at least 8192"));
}

}  // namespace
}  // namespace layerstream

// GenerateOptions::structured on the example model (its vocabulary has a
// token per byte, so it can spell any JSON): at temperature 1 its
// pseudo-random logits would write noise; the mask must make every draw,
// over several seeds, JSON that satisfies the schema and ends the sequence.
// Also: a regex, a schema that does not compile, and speculation refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "layerstream/layerstream.h"
#include "runtime/grammar/grammar_compiler.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

using ::testing::HasSubstr;

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "color": {"enum": ["red", "green", "blue"]},
    "count": {"type": "integer"},
    "ok": {"type": "boolean"}
  },
  "required": ["color", "count", "ok"]
})";

class StructuredOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.file("model.gguf");
    ASSERT_TRUE(testing::write_scratch_model(
                    path, testing::tiny_llama_spec(GgmlType::F32, testing::fresh_seed(), 512))
                    .ok());
    ModelOptions o;
    o.backend = Backend::kHost;
    o.host_threads = 2;
    o.context = 384;
    auto m = Model::open(path, o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = *m;
  }

  Result<GenerateResult> generate(StructuredOutput::Kind kind, const std::string& text, uint64_t seed) {
    GenerateOptions g;
    g.max_tokens = 300;
    g.sampling.temperature = 1.0f;
    g.sampling.seed = seed;
    g.structured = {kind, text};
    auto ctx = model_->create_context().value();
    return ctx->generate("Answer in JSON:", g);
  }

  testing::TempDir dir_;
  std::shared_ptr<Model> model_;
};

TEST_F(StructuredOutputTest, JsonSchemaHoldsAtTemperatureOneOverSeeds) {
  if (!grammar::structured_output_available()) {
    auto r = generate(StructuredOutput::Kind::kJsonSchema, kSchema, 1);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
    GTEST_SKIP() << "built without the grammar engine: checked the Unsupported answer only";
  }
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto r = generate(StructuredOutput::Kind::kJsonSchema, kSchema, seed);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::string& text = r->text[0];
    ASSERT_EQ(r->finish[0], FinishReason::kEndOfGeneration) << "seed " << seed << ": " << text;
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "seed " << seed << " wrote no JSON object: " << text;
    EXPECT_EQ(j.size(), 3u) << text;  // strict: nothing beyond the named properties
    ASSERT_TRUE(j.contains("color") && j.contains("count") && j.contains("ok")) << text;
    EXPECT_THAT((std::vector<std::string>{"red", "green", "blue"}), ::testing::Contains(j["color"])) << text;
    EXPECT_TRUE(j["count"].is_number_integer()) << text;
    EXPECT_TRUE(j["ok"].is_boolean()) << text;
  }
}

TEST_F(StructuredOutputTest, RegexHoldsAtTemperatureOne) {
  if (!grammar::structured_output_available()) GTEST_SKIP() << "built without the grammar engine";
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    auto r = generate(StructuredOutput::Kind::kRegex, "(yes|no), [0-9]{2}", seed);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_THAT(r->text[0], ::testing::MatchesRegex("(yes|no), [0-9][0-9]")) << "seed " << seed;
    EXPECT_EQ(r->finish[0], FinishReason::kEndOfGeneration);
  }
}

TEST_F(StructuredOutputTest, BadSchemaIsInvalidArgumentNamingTheKind) {
  if (!grammar::structured_output_available()) GTEST_SKIP() << "built without the grammar engine";
  auto r = generate(StructuredOutput::Kind::kJsonSchema, R"({"type": "object", "properties": 7)", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("json_schema"));
}

TEST_F(StructuredOutputTest, SpeculationWithAConstraintIsRefused) {
  GenerateOptions g;
  g.structured = {StructuredOutput::Kind::kJsonObject, ""};
  g.speculative.draft = make_lookup_draft().value();
  auto ctx = model_->create_context().value();
  auto r = ctx->generate("x", g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("speculative"));
}

}  // namespace
}  // namespace layerstream

// forced_tool_calls (layerstream/chat.h), what tool_choice "required" and a
// named function decode under: on the example model (a token per byte, so
// it can spell anything) at temperature 1 its pseudo-random logits would
// write noise; under the constraint every draw must be calls that
// parse_tool_calls reads back in the same format, naming offered tools with
// arguments valid under their schemas, and the reply must end there.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "layerstream/layerstream.h"
#include "runtime/grammar/grammar_compiler.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

using nlohmann::json;

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object",
    "properties": {"city": {"type": "string", "pattern": "^[a-z]{1,6}$"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object",
    "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["days"]}}},
  {"type": "function", "function": {"name": "ping"}}
])";

// The arguments a call may carry, per tool of kTools.
void expect_valid_arguments(const ToolCall& call) {
  const json args = json::parse(call.arguments);
  ASSERT_TRUE(args.is_object()) << call.arguments;
  if (call.name == "get_weather") {
    ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << call.arguments;
    const std::string city = args["city"];
    EXPECT_TRUE(!city.empty() && city.size() <= 6 &&
                city.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos)
        << call.arguments;
    EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << call.arguments;
  } else if (call.name == "get_time") {
    ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << call.arguments;
    EXPECT_GE(args["days"].get<int>(), 1);
    EXPECT_LE(args["days"].get<int>(), 7);
  } else {
    EXPECT_EQ(call.name, "ping");
    EXPECT_TRUE(args.empty()) << call.arguments;  // no parameters: no arguments
  }
}

class ForcedToolCallsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!grammar::structured_output_available()) GTEST_SKIP() << "a build without structured output";
    const std::string path = dir_.file("model.gguf");
    const ExampleModelSpec spec = testing::tiny_llama_spec(GgmlType::F32, testing::fresh_seed(), 512);
    ASSERT_TRUE(testing::write_scratch_model(path, spec).ok());
    model_ = Model::open(path, host_options()).value();
  }

  static ModelOptions host_options() {
    ModelOptions o;
    o.backend = Backend::kHost;
    o.host_threads = 2;
    o.context = 512;
    return o;
  }

  // The reply under the constraint at temperature 1.
  GenerateResult generate(ToolCallFormat format, const ToolCallForcing& forcing, uint64_t seed) {
    auto structured = forced_tool_calls(format, kTools, forcing);
    EXPECT_TRUE(structured.ok()) << structured.status().ToString();
    GenerateOptions g;
    g.max_tokens = 400;
    g.sampling.temperature = 1.0f;
    g.sampling.seed = seed;
    g.structured = structured.ok() ? *structured : StructuredOutput{};
    auto ctx = model_->create_context().value();
    auto r = ctx->generate("Call a tool:", g);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : GenerateResult{};
  }

  // The same, which must have ended (not been cut off), parsed in `format`:
  // nothing but calls.
  ChatOutput reply(ToolCallFormat format, const ToolCallForcing& forcing, uint64_t seed) {
    const GenerateResult r = generate(format, forcing, seed);
    if (r.finish.empty()) return {};
    EXPECT_EQ(r.finish[0], FinishReason::kEndOfGeneration) << r.text[0];
    ChatOutput out = parse_tool_calls(format, r.text[0]);
    EXPECT_EQ(out.content, "") << r.text[0];
    return out;
  }

  testing::TempDir dir_;
  std::shared_ptr<Model> model_;
};

// One call (parallel_tool_calls false), so the random text ends within max_tokens.
TEST_F(ForcedToolCallsTest, EveryFormatDecodesACallItsParserReadsBack) {
  for (ToolCallFormat format : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral})
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(std::string(tool_call_format_name(format)) + " seed " + std::to_string(seed));
      const ChatOutput out = reply(format, {.parallel = false}, seed);
      ASSERT_EQ(out.tool_calls.size(), 1u);
      expect_valid_arguments(out.tool_calls[0]);
    }
}

TEST_F(ForcedToolCallsTest, ANamedFunctionIsTheOnlyOneCalled) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const ChatOutput out = reply(ToolCallFormat::kHermes, {.function = "get_time", .parallel = false}, seed);
    ASSERT_EQ(out.tool_calls.size(), 1u) << "seed " << seed;
    EXPECT_EQ(out.tool_calls[0].name, "get_time");
    expect_valid_arguments(out.tool_calls[0]);
  }
}

// Parallel calls: the random text may go on calling until max_tokens; the
// replies that ended hold nothing but valid calls, and some do end.
TEST_F(ForcedToolCallsTest, ParallelCallsAreEachValid) {
  int ended = 0;
  for (ToolCallFormat format : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral})
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(std::string(tool_call_format_name(format)) + " seed " + std::to_string(seed));
      const GenerateResult r = generate(format, {}, seed);
      ASSERT_FALSE(r.finish.empty());
      if (r.finish[0] != FinishReason::kEndOfGeneration) continue;
      ++ended;
      const ChatOutput out = parse_tool_calls(format, r.text[0]);
      EXPECT_EQ(out.content, "") << r.text[0];
      ASSERT_FALSE(out.tool_calls.empty()) << r.text[0];
      for (const ToolCall& call : out.tool_calls) expect_valid_arguments(call);
    }
  EXPECT_GT(ended, 0);
}

TEST(ForcedToolCalls, RefusesWhatItCannotForce) {
  auto none = forced_tool_calls(ToolCallFormat::kNone, kTools);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  auto unknown = forced_tool_calls(ToolCallFormat::kHermes, kTools, {.function = "get_mood"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'get_mood'"), std::string::npos) << unknown.status().message();
  EXPECT_FALSE(forced_tool_calls(ToolCallFormat::kHermes, R"({"name": "f"})").ok());
  EXPECT_FALSE(forced_tool_calls(ToolCallFormat::kHermes, R"([{"type": "function", "function": {}}])").ok());
}

}  // namespace
}  // namespace layerstream

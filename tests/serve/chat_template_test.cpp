// ChatTemplate (layerstream/chat.h) over real models' templates: tools and
// tool turns reach templates that know them (Qwen 2.5, Llama 3.1), the
// Hermes polyfill writes them for templates that do not (SmolLM2's file,
// Gemma), the tool-call format each implies, and the template choice
// (file, built-in name, Jinja file, ChatML fallback).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "layerstream/chat.h"
#include "runtime/model/example_model.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string test_template(const std::string& name) {
  return slurp(std::string(LAYERSTREAM_SOURCE_DIR) + "/tests/serve/data/chat_templates/" + name);
}

// system, user, an assistant call, its result: what a client sends after a call.
std::vector<ChatMessage> tool_conversation() {
  return {{.role = "system", .content = "You are terse."},
          {.role = "user", .content = "Weather in Paris?"},
          {.role = "assistant",
           .tool_calls = {{.id = "call_1", .name = "get_weather", .arguments = R"({"city": "Paris"})"}}},
          {.role = "tool", .content = R"({"temp": 21})", .tool_call_id = "call_1"}};
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing:\n" << part << "\nin:\n" << text;
}

TEST(ChatTemplate, QwenGetsToolsCallsAndResultsAndParsesHermes) {
  auto t = ChatTemplate::create(test_template("qwen2.5.jinja"), "", "<|im_end|>");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->tool_call_format(), ToolCallFormat::kHermes);
  auto text = t->apply(tool_conversation(), {.tools_json = kTools});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  // The tool as Qwen's template writes it (json.dumps of the tool, key order kept).
  expect_contains(*text,
                  "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                  "\"description\": \"Weather of a city\"");
  expect_contains(*text, "<|im_start|>system\nYou are terse.\n\n# Tools");
  // The call's arguments reach the template as a dict (tojson of it).
  expect_contains(*text,
                  "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                  "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>");
  expect_contains(*text, "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>");
  EXPECT_TRUE(text->ends_with("<|im_start|>assistant\n"));
}

TEST(ChatTemplate, Llama3BuiltinGetsToolsCallsAndResultsAndParsesLlamaJson) {
  testing::TempDir dir;
  const std::string model = dir.file("tiny.gguf");
  ASSERT_TRUE(write_example_model(model, testing::tiny_llama_spec(GgmlType::F32, 2, 64)).ok());
  auto llama = ChatTemplate::for_file(model, "llama3");
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_EQ(llama->tool_call_format(), ToolCallFormat::kLlama3);
  auto text = llama->apply(tool_conversation(), {.tools_json = kTools});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  expect_contains(*text, "Environment: ipython\n");
  expect_contains(*text,
                  "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\"");
  expect_contains(*text,
                  "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", "
                  "\"parameters\": {\"city\": \"Paris\"}}<|eot_id|>");
  // Llama 3.1's template writes a string result through tojson (a string is
  // iterable in Jinja), as jinja2 does.
  expect_contains(*text, "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 21}\"<|eot_id|>");
  // Two calls in one turn: Llama 3.1's template refuses, and says why.
  auto two = tool_conversation();
  two[2].tool_calls.push_back({.id = "call_2", .name = "get_weather", .arguments = R"({"city": "Rome"})"});
  auto refused = llama->apply(two, {.tools_json = kTools});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("single tool-calls"), std::string::npos)
      << refused.status().message();
}

TEST(ChatTemplate, TemplatesWithoutToolsGetTheHermesPolyfill) {
  const std::string smol = std::string(getenv("HOME") ? getenv("HOME") : "") +
                           "/.cache/layerstream/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(smol)) GTEST_SKIP() << smol << " is not there (tests/fetch_models)";
  for (const std::string spec : {"", "gemma"}) {
    auto t = ChatTemplate::for_file(smol, spec);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->tool_call_format(), ToolCallFormat::kHermes) << spec;
    auto text = t->apply(tool_conversation(), {.tools_json = kTools});
    ASSERT_TRUE(text.ok()) << spec << ": " << text.status().ToString();
    // The tools, after the client's system text, in the Hermes instructions.
    expect_contains(*text, "You are terse.\n\n# Tools\n\nYou may call one or more functions");
    expect_contains(*text, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"");
    expect_contains(
        *text,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
    // Gemma wants user/model turns alternating: the result is a user turn.
    expect_contains(*text, (spec.empty() ? "<|im_start|>user\n" : "<start_of_turn>user\n") +
                               std::string("<tool_response>\n{\"temp\": 21}\n</tool_response>"));
  }
  // Without tools, SmolLM2's own text: its default system prompt, no Hermes.
  auto plain = ChatTemplate::for_file(smol);
  ASSERT_TRUE(plain.ok());
  auto text = plain->apply({{.role = "user", .content = "Hi"}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// The templates in llama.cpp's vocabulary files (Qwen 2/3.5, Gemma 4,
// Phi-3, Command-R, ...): each renders the tool conversation (or refuses it
// with its own message), and where it renders, the tool and the earlier
// call are in the prompt the model sees.
TEST(ChatTemplate, VocabularyFilesTemplatesShowToolsAndCalls) {
  const std::string dir = std::string(getenv("HOME") ? getenv("HOME") : "") + "/.cache/layerstream/vocabs";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is not there";
  int found = 0, rendered = 0;
  // The ones that carry a template (the others would only test the fallback).
  for (const char* name : {"qwen2", "qwen35", "gemma-4", "phi-3", "command-r"}) {
    const std::string path = dir + "/ggml-vocab-" + name + ".gguf";
    if (!std::filesystem::exists(path)) continue;
    ++found;
    auto t = ChatTemplate::for_file(path);
    ASSERT_TRUE(t.ok()) << path << ": " << t.status().ToString();
    auto text = t->apply(tool_conversation(), {.tools_json = kTools});
    if (!text.ok()) {
      EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument) << path;
      continue;
    }
    ++rendered;
    expect_contains(*text, "get_weather");
    if (t->tool_call_format() != ToolCallFormat::kNone) expect_contains(*text, "Paris");
  }
  if (found == 0) GTEST_SKIP() << "no vocabulary file with a chat template in " << dir;
  EXPECT_GT(rendered, 0);
}

TEST(ChatTemplate, ChoosesTheFileBuiltinOrJinjaFileAndFallsBackToChatMl) {
  testing::TempDir dir;
  const std::string model = dir.file("tiny.gguf");
  ASSERT_TRUE(write_example_model(model, testing::tiny_llama_spec(GgmlType::F32, 2, 64)).ok());
  auto fallback = ChatTemplate::for_file(model);  // the example model has no template
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  auto text = fallback->apply({{.role = "system", .content = "S"}, {.role = "user", .content = "U"}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(fallback->turn_ends(), std::vector<std::string>{"<|im_end|>"});

  const std::string file = dir.file("mine.jinja");
  std::ofstream(file) << "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
                         "{% if add_generation_prompt %}[TOOL_CALLS]?{% endif %}";
  auto mine = ChatTemplate::for_file(model, file);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(mine->tool_call_format(), ToolCallFormat::kMistral);
  auto with_bos = mine->apply({{.role = "user", .content = "U"}});
  ASSERT_TRUE(with_bos.ok());
  EXPECT_EQ(*with_bos, mine->bos_token() + "[user]U[TOOL_CALLS]?");
  EXPECT_FALSE(mine->bos_token().empty());
  auto without = mine->apply({{.role = "user", .content = "U"}}, {.leave_bos_to_tokenizer = true});
  EXPECT_EQ(*without, "[user]U[TOOL_CALLS]?");

  auto missing = ChatTemplate::for_file(model, dir.file("nope.jinja"));
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
  for (const char* named : {"nope.jinja", "chatml", "llama3", "gemma"})
    EXPECT_NE(missing.status().message().find(named), std::string::npos) << missing.status().message();
}

TEST(ChatTemplate, RefusesToolsThatAreNotFunctionToolsAndRaisesTheTemplatesErrors) {
  auto t = ChatTemplate::create(test_template("qwen2.5.jinja"), "", "");
  ASSERT_TRUE(t.ok());
  const std::vector<ChatMessage> hi = {{.role = "user", .content = "hi"}};
  for (const char* tools :
       {"{", R"({"type": "function"})", R"([{"type": "code"}])", R"([{"type": "function"}])"}) {
    auto r = t->apply(hi, {.tools_json = tools});
    ASSERT_FALSE(r.ok()) << tools;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << tools;
    EXPECT_NE(r.status().message().find("tools"), std::string::npos) << r.status().message();
  }
  auto strict = ChatTemplate::create(
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}"
      "{{ m.content }}{% endfor %}",
      "", "");
  ASSERT_TRUE(strict.ok());
  auto refused = strict->apply({{.role = "system", .content = "x"}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no system"), std::string::npos);
  auto syntax = ChatTemplate::create("line one\n{% for x in %}{% endfor %}", "", "");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("line 2"), std::string::npos) << syntax.status().message();
}

}  // namespace
}  // namespace layerstream

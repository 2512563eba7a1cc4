// Tool calls in model output (layerstream/chat.h) for the Hermes, Llama 3 and
// Mistral formats: well-formed replies become calls with JSON arguments,
// malformed ones stay text; streamed, the text shown before the call and the
// calls at the end agree with the whole-reply parse for every split point;
// and serve's request fields and response bodies for tools.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "layerstream/chat.h"
#include "runtime/serve/chat_response.h"
#include "runtime/serve/openai_protocol.h"

namespace layerstream {
namespace {

using nlohmann::json;

// The arguments text as JSON (it must be a valid object).
json args(const ToolCall& c) {
  json j = json::parse(c.arguments, nullptr, false);
  EXPECT_TRUE(j.is_object()) << c.arguments;
  return j;
}

void expect_call(const ToolCall& c, const std::string& name, const json& arguments) {
  EXPECT_EQ(c.name, name);
  EXPECT_EQ(args(c), arguments) << c.arguments;
}

TEST(ToolCalls, HermesFindsEveryCallAndKeepsTheTextAroundThem) {
  const ChatOutput one = parse_tool_calls(ToolCallFormat::kHermes,
                                          "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
                                          "\"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
                                          "</tool_call>");
  EXPECT_EQ(one.content, "Let me check.");
  ASSERT_EQ(one.tool_calls.size(), 1u);
  expect_call(one.tool_calls[0], "get_weather", json({{"city", "Paris"}, {"days", 2}}));
  EXPECT_TRUE(one.tool_calls[0].id.starts_with("call_")) << one.tool_calls[0].id;

  // Two calls, arguments given as a JSON string, the last block left open
  // (the reply ended at the turn end before </tool_call>).
  const ChatOutput two =
      parse_tool_calls(ToolCallFormat::kHermes,
                       "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}</tool_call>\n"
                       "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n");
  EXPECT_EQ(two.content, "");
  ASSERT_EQ(two.tool_calls.size(), 2u);
  expect_call(two.tool_calls[0], "a", json({{"x", {1, 2}}}));
  expect_call(two.tool_calls[1], "b", json::object());
  EXPECT_NE(two.tool_calls[0].id, two.tool_calls[1].id);
}

TEST(ToolCalls, MalformedCallsStayTextInEveryFormat) {
  const std::vector<std::pair<ToolCallFormat, std::string>> replies = {
      {ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}\n</tool_call>"},
      {ToolCallFormat::kHermes, "<tool_call>{\"arguments\": {}}</tool_call>"},  // no name
      {ToolCallFormat::kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>"},  // not an object
      {ToolCallFormat::kHermes, "Plain prose, no call at all."},
      {ToolCallFormat::kLlama3, "{\"name\": \"f\", \"parameters\": {\"a\": "},
      {ToolCallFormat::kLlama3, "{\"answer\": 42}"},
      {ToolCallFormat::kLlama3, "Sure: {\"name\": \"f\", \"parameters\": {}}"},  // a call only opens a reply
      {ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}"},
      {ToolCallFormat::kMistral, "[1, 2, 3]"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS]f{\"a\": 1}"},  // no [ARGS]
      {ToolCallFormat::kNone, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"},
  };
  for (const auto& [format, text] : replies) {
    const ChatOutput out = parse_tool_calls(format, text);
    EXPECT_TRUE(out.tool_calls.empty()) << tool_call_format_name(format) << ": " << text;
    EXPECT_EQ(out.content, text) << tool_call_format_name(format);
  }
}

TEST(ToolCalls, Llama3TakesTheReplyAsCallsWithOrWithoutThePythonTag) {
  for (const std::string prefix : {"", "<|python_tag|>", "\n "}) {
    const ChatOutput out =
        parse_tool_calls(ToolCallFormat::kLlama3,
                         prefix + "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
    EXPECT_EQ(out.content, "");
    ASSERT_EQ(out.tool_calls.size(), 1u) << prefix;
    expect_call(out.tool_calls[0], "get_weather", json({{"city", "Paris"}}));
  }
  // Llama 3.2 separates calls with ';'; a ';' inside a string is no separator.
  const ChatOutput two = parse_tool_calls(
      ToolCallFormat::kLlama3,
      "{\"name\": \"a\", \"parameters\": {\"s\": \"x};y\"}}; {\"name\": \"b\", \"parameters\": {}}");
  ASSERT_EQ(two.tool_calls.size(), 2u) << two.content;
  EXPECT_EQ(args(two.tool_calls[0]), json({{"s", "x};y"}}));
  EXPECT_EQ(two.tool_calls[1].name, "b");
}

TEST(ToolCalls, MistralTakesTheArrayAndTheArgsFormsWithNineCharacterIds) {
  for (const std::string text :
       {"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", "
        "\"arguments\": {}}]",
        " [{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]",
        "[TOOL_CALLS]f[ARGS]{\"a\": 1}[TOOL_CALLS]g[ARGS]{}"}) {
    const ChatOutput out = parse_tool_calls(ToolCallFormat::kMistral, text);
    ASSERT_EQ(out.tool_calls.size(), 2u) << text;
    expect_call(out.tool_calls[0], "f", json({{"a", 1}}));
    EXPECT_EQ(out.tool_calls[1].name, "g");
    for (const ToolCall& c : out.tool_calls) {
      EXPECT_EQ(c.id.size(), 9u) << c.id;  // Mistral's templates refuse other ids
      for (char ch : c.id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << c.id;
    }
  }
}

TEST(ToolCalls, IdsAreUnique) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i)
    ids.insert(parse_tool_calls(ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\"}</tool_call>")
                   .tool_calls.at(0)
                   .id);
  EXPECT_EQ(ids.size(), 1000u);
}

// Every split of the reply into two deltas, then byte by byte: what is shown
// plus what finish() returns is the parse of the whole, and nothing of a
// call is shown before the end.
TEST(ToolCallStream, AgreesWithTheWholeReplyParseForEverySplit) {
  const std::vector<std::pair<ToolCallFormat, std::string>> replies = {
      {ToolCallFormat::kHermes,
       "Checking <tool><tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"},
      {ToolCallFormat::kHermes, "No call here, just a < sign and <tool_ca text."},
      {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {bad}}</tool_call>"},
      {ToolCallFormat::kLlama3, " {\"name\": \"f\", \"parameters\": {\"a\": 1}}"},
      {ToolCallFormat::kLlama3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}"},
      {ToolCallFormat::kLlama3, "<b>bold</b> prose"},
      {ToolCallFormat::kLlama3, "{not json at all"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]"},
      {ToolCallFormat::kMistral, "Text first [TOOL_CALLS]f[ARGS]{\"a\": 2}"},
      {ToolCallFormat::kNone, "anything <tool_call>"},
  };
  for (const auto& [format, text] : replies) {
    const ChatOutput whole = parse_tool_calls(format, text);
    for (size_t split = 0; split <= text.size(); ++split) {
      ToolCallStream stream(format);
      std::string shown = stream.feed(text.substr(0, split));
      for (size_t i = split; i < text.size(); ++i) shown += stream.feed(text.substr(i, 1));
      const ChatOutput end = stream.finish();
      ASSERT_EQ(end.tool_calls.size(), whole.tool_calls.size()) << text << " split " << split;
      for (size_t k = 0; k < end.tool_calls.size(); ++k) {
        EXPECT_EQ(end.tool_calls[k].name, whole.tool_calls[k].name);
        EXPECT_EQ(end.tool_calls[k].arguments, whole.tool_calls[k].arguments);
      }
      if (whole.tool_calls.empty()) {
        EXPECT_EQ(shown + end.content, text) << tool_call_format_name(format) << " split " << split;
      } else {  // the text before the call, then nothing of it
        EXPECT_EQ(shown.find_first_of("{["), std::string::npos) << shown;
        EXPECT_EQ(whole.content, std::string(shown.substr(0, shown.find_last_not_of(" ") + 1)) + end.content)
            << text << " split " << split;
      }
    }
  }
}

TEST(ServeTools, ParsesToolsToolChoiceAndToolHistory) {
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])";
  serve::CompletionParams p;
  auto e = serve::parse_completion_request(
      R"({"messages":[{"role":"user","content":"w?"},
          {"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function",
            "function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
          {"role":"tool","tool_call_id":"call_9","content":"cold"}],)" +
          tools + R"(,"parallel_tool_calls":false})",
      true, "m", p);
  ASSERT_FALSE(e) << e->message;
  const serve::ChatRequest& c = p.conversation;
  ASSERT_EQ(c.messages.size(), 3u);
  ASSERT_EQ(c.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(c.messages[1].tool_calls[0].id, "call_9");
  EXPECT_EQ(c.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(c.messages[1].tool_calls[0].arguments), json({{"city", "Oslo"}}));
  EXPECT_EQ(c.messages[2].tool_call_id, "call_9");
  EXPECT_EQ(c.tool_choice, serve::ToolChoice::kAuto);  // tools given: auto
  EXPECT_FALSE(c.parallel_tool_calls);
  EXPECT_EQ(json::parse(c.tools_json)[0]["function"]["name"], "get_weather");

  struct Bad {
    std::string fields, param, says;
  };
  const std::vector<Bad> bad = {
      {tools + R"(,"tool_choice":{"type":"function","function":{"name":"other"}})", "tool_choice", "'other'"},
      {tools + R"(,"tool_choice":"sometimes")", "tool_choice", "\"auto\""},
      {R"("tool_choice":"auto")", "tool_choice", "only allowed when 'tools'"},
      {R"("tools":[])", "tools", "non-empty"},
      {R"("tools":[{"type":"function","function":{}}])", "tools[0].function.name", "must be a string"},
      {tools + R"(,"parallel_tool_calls":"yes")", "parallel_tool_calls", "boolean"},
  };
  for (const Bad& b : bad) {
    serve::CompletionParams q;
    auto err = serve::parse_completion_request(
        R"({"messages":[{"role":"user","content":"hi"}],)" + b.fields + "}", true, "m", q);
    ASSERT_TRUE(err) << b.fields;
    EXPECT_EQ(err->http_status, 400);
    EXPECT_EQ(err->param, b.param) << b.fields;
    EXPECT_NE(err->message.find(b.says), std::string::npos) << err->message;
  }
  serve::CompletionParams none;
  ASSERT_FALSE(serve::parse_completion_request(
      R"({"messages":[{"role":"user","content":"hi"}],)" + tools + R"(,"tool_choice":"none"})", true, "m",
      none));
  EXPECT_EQ(none.conversation.tool_choice, serve::ToolChoice::kNone);
  EXPECT_FALSE(none.conversation.tools_json.empty());  // still shown to the template

  serve::CompletionParams required, named;
  ASSERT_FALSE(serve::parse_completion_request(
      R"({"messages":[{"role":"user","content":"hi"}],)" + tools + R"(,"tool_choice":"required"})", true, "m",
      required));
  EXPECT_EQ(required.conversation.tool_choice, serve::ToolChoice::kRequired);
  ASSERT_FALSE(serve::parse_completion_request(
      R"({"messages":[{"role":"user","content":"hi"}],)" + tools +
          R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}}})",
      true, "m", named));
  EXPECT_EQ(named.conversation.tool_choice, serve::ToolChoice::kNamed);
  EXPECT_EQ(named.conversation.tool_name, "get_weather");
}

TEST(ServeTools, ResponsesCarryCallsAsOpenAiShapesThem) {
  serve::RequestState::Chunk all;
  all.done = true;
  all.reason = FinishReason::kEndOfGeneration;
  all.text =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call><tool_call>{\"name\": "
      "\"g\"}</tool_call>";
  // Two choices (n = 2): the second's reply holds the calls.
  const std::vector<serve::Choice> choices{{"plain text", FinishReason::kEndOfGeneration, nullptr},
                                           {all.text, all.reason, nullptr}};
  json body = serve::completion_response({"chatcmpl-1", "m", 0}, true, choices, all);
  ChatOutput out = parse_tool_calls(ToolCallFormat::kHermes, all.text);
  serve::apply_rules({ToolCallFormat::kHermes, /*parallel=*/false}, out);
  serve::set_chat_output(body, 1, out);
  EXPECT_EQ(body["choices"][0]["message"]["content"], "plain text");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  const json& choice = body["choices"][1];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);  // parallel_tool_calls false: the first
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "f");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), json({{"a", 1}}));
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));

  json chunk = serve::stream_chunk({"chatcmpl-1", "m", 0}, true, 0, "", false, FinishReason::kNone);
  serve::set_tool_calls_delta(chunk, out.tool_calls);
  const json& delta = chunk["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(delta["index"], 0);
  EXPECT_EQ(delta["id"], call["id"]);
  EXPECT_EQ(delta["function"]["arguments"], call["function"]["arguments"]);
  // Streamed: text first, then held from the tag on; at the end what was
  // held goes out as the text's tail and one tool_calls delta.
  ToolCallStream stream(ToolCallFormat::kHermes);
  EXPECT_EQ(stream.feed("Sure. <tool"), "Sure. ");
  EXPECT_EQ(stream.feed("_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call> done"), "");
  const serve::HeldReply held =
      serve::finish_streamed_reply(stream, {ToolCallFormat::kHermes}, {"chatcmpl-1", "m", 0}, 0);
  ASSERT_EQ(held.chunks.size(), 2u);
  EXPECT_TRUE(held.has_calls);
  EXPECT_EQ(held.chunks[0]["choices"][0]["delta"]["content"], "done");
  EXPECT_EQ(held.chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "f");

  json end = serve::stream_chunk({"chatcmpl-1", "m", 0}, true, 0, "", false, FinishReason::kLength);
  serve::finish_with_tool_calls(end);
  EXPECT_EQ(end["choices"][0]["finish_reason"], "length");  // cut off: not a finished call
}

}  // namespace
}  // namespace layerstream

// Unit tests of the server's parts: stop-string streaming, request parsing
// and Jinja error reporting. (Jinja rendering is checked against Python's
// jinja2 in chat_templates_test.py; chat templates and tool calls in
// chat_template_test.cpp and tool_call_test.cpp.)
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "runtime/chat/jinja.h"
#include "runtime/llama/text_stream.h"
#include "runtime/serve/openai_protocol.h"
#include "runtime/serve/request_fields.h"

namespace layerstream::serve {
namespace {

// Feeds `text` one byte at a time, as tokens would grow it.
std::string stream_all(TextStream& ts, const std::string& text) {
  std::string out;
  for (size_t i = 1; i <= text.size(); ++i) out += ts.update(text.substr(0, i));
  if (!ts.stopped()) out += ts.finish(text);
  return out;
}

TEST(TextStream, StopsBeforeTheFirstStopStringAndNeverLeaksItsPrefix) {
  TextStream ts({"END", "\n\n"});
  std::string seen;
  const std::string text = "abc EN def END ghi";
  for (size_t i = 1; i <= text.size(); ++i) {
    seen += ts.update(text.substr(0, i));
    // Never more than the text before the stop, whatever prefix arrived.
    EXPECT_EQ(text.substr(0, seen.size()), seen);
    EXPECT_LE(seen.size(), text.find("END"));
  }
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(seen, "abc EN def ");
}

TEST(TextStream, WithoutAStopEverythingIsReleasedAtFinish) {
  TextStream ts({"zzz"});
  EXPECT_EQ(stream_all(ts, "hello zz"), "hello zz");
  EXPECT_FALSE(ts.stopped());
}

TEST(TextStream, HoldsBackAPartialUtf8Character) {
  TextStream ts({});
  const std::string check = "\xE2\x9C\x93";  // U+2713, 3 bytes
  EXPECT_EQ(ts.update("a" + check.substr(0, 1)), "a");
  EXPECT_EQ(ts.update("a" + check.substr(0, 2)), "");
  EXPECT_EQ(ts.update("a" + check), check);
}

TEST(OpenAiProtocol, ParsesAChatRequest) {
  CompletionParams p;
  auto e = parse_completion_request(
      R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
          "max_tokens":7,"temperature":0.5,"top_p":0.8,"seed":3,"stop":["x","y"],"stream":true,"stream_options":{"include_usage":true}})",
      true, "m", p);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(p.conversation.messages.size(), 2u);
  EXPECT_EQ(p.conversation.messages[1].content, "ab");
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.8f);
  EXPECT_EQ(p.sampling.seed, 3u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(p.stream && p.include_usage);
}

TEST(OpenAiProtocol, NamesTheFieldOfEachError) {
  struct Case {
    const char* body;
    int status;
    const char* param;
  } cases[] = {
      {"{", 400, ""},
      {R"({"prompt":1})", 400, "prompt"},
      {R"({"prompt":"a","max_tokens":1.5})", 400, "max_tokens"},
      {R"({"prompt":"a","temperature":-1})", 400, "temperature"},
      {R"({"prompt":"a","stop":["a","b","c","d","e"]})", 400, "stop"},
      {R"({"prompt":"a","model":"other"})", 404, "model"},
      {R"({"prompt":"a","stream":true,"stream_options":{"include_usage":"yes"}})", 400, "stream_options"},
      {R"({"prompt":"a","stream_options":[true]})", 400, "stream_options"},
      {R"({"prompt":"a","seed":"7"})", 400, "seed"},
      {R"({"prompt":"a","n":0})", 400, "n"},
      {R"({"prompt":"a","n":2,"best_of":3})", 400, "best_of"},
      {R"({"prompt":"a","frobnicate":1})", 400, "frobnicate"},
      {R"({"prompt":"a","top_logprobs":2})", 400, "top_logprobs"},
      {R"({"prompt":"a","logprobs":21})", 400, "logprobs"},
      {R"({"prompt":"a","presence_penalty":2.5})", 400, "presence_penalty"},
      {R"({"prompt":"a","logit_bias":{"x":1}})", 400, "logit_bias"},
      {R"({"prompt":"a","logit_bias":{"5":101}})", 400, "logit_bias"},
      {R"({"prompt":"a","suffix":"z"})", 400, "suffix"},
  };
  for (const Case& c : cases) {
    CompletionParams p;
    auto e = parse_completion_request(c.body, false, "m", p);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->http_status, c.status) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body;
    EXPECT_TRUE(e->body()["error"]["message"].is_string());
  }
}

// Every field of the table, sent with a value of a type it does not take,
// gets a 400 naming it; refused fields with a real value too; accepted and
// ignored ones change nothing; a field of the other endpoint is refused.
TEST(OpenAiProtocol, EveryFieldWithAWrongTypeIsA400NamingIt) {
  const nlohmann::json wrong_values[] = {"text", 1.5, true, nlohmann::json::object(), nlohmann::json::array()};
  int checked = 0;
  for (const RequestField& f : request_fields()) {
    for (bool chat : {true, false}) {
      if (!(chat ? f.chat : f.completions)) continue;
      const std::string types = std::string(f.name) == "logprobs" ? (chat ? "boolean" : "integer") : f.types;
      bool sent = false;
      for (const nlohmann::json& v : wrong_values) {
        const bool fits = (v.is_string() && types.find("string") != std::string::npos) ||
                          (v.is_number() && types.find("number") != std::string::npos) ||
                          (v.is_boolean() && types.find("boolean") != std::string::npos) ||
                          (v.is_object() && types.find("object") != std::string::npos) ||
                          (v.is_array() && types.find("array") != std::string::npos);
        if (fits) continue;
        nlohmann::json body = chat ? nlohmann::json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}}
                                   : nlohmann::json{{"prompt", "hi"}};
        body[f.name] = v;
        CompletionParams p;
        auto e = parse_completion_request(body.dump(), chat, "m", p);
        ASSERT_TRUE(e) << body.dump();
        EXPECT_EQ(e->http_status, 400) << body.dump();
        EXPECT_EQ(e->param, f.name) << body.dump();
        EXPECT_NE(e->message.find(f.name), std::string::npos) << e->message;
        sent = true;
      }
      EXPECT_TRUE(sent) << f.name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
  auto parse = [](const std::string& body, bool chat) {
    CompletionParams p;
    return parse_completion_request(body, chat, "m", p);
  };
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  // Refused: a value that asks for something not done.
  for (const char* extra : {R"("functions":[{"name":"f"}])", R"("function_call":"auto")",
                            R"("modalities":["text","audio"])"}) {
    auto e = parse("{" + msgs + "," + extra + "}", true);
    ASSERT_TRUE(e) << extra;
    EXPECT_NE(e->message.find("not supported"), std::string::npos) << e->message;
  }
  // ... and the values that ask for nothing more are accepted, as are the ignored fields.
  const auto accepted = parse("{" + msgs + R"(,"functions":[],"function_call":"none","response_format":{"type":"text"},
                     "modalities":["text"],"user":"u","store":false,"metadata":{"a":"b"},"service_tier":"auto",
                     "parallel_tool_calls":true,"prompt_cache_key":"k","seed":null})", true);
  EXPECT_FALSE(accepted) << accepted->message;
  // SGLang's router adds its extension fields to every request it forwards, at their defaults:
  // accepted as they are, refused (naming the field) when they ask for something.
  const std::string sglang = R"(,"no_stop_trim":false,"ignore_eos":false,"continue_final_message":false,
      "skip_special_tokens":true,"separate_reasoning":true,"stream_reasoning":true,"return_hidden_states":false)";
  const auto routed = parse("{" + msgs + sglang + "}", true);
  EXPECT_FALSE(routed) << routed->message;
  EXPECT_FALSE(parse(R"({"prompt":"a","no_stop_trim":false,"ignore_eos":false,"skip_special_tokens":true})", false));
  EXPECT_EQ(parse("{" + msgs + R"(,"ignore_eos":true})", true)->param, "ignore_eos");
  EXPECT_EQ(parse("{" + msgs + R"(,"skip_special_tokens":false})", true)->param, "skip_special_tokens");
  // response_format: the kinds become the constraint; a json_schema without a schema or another type: 400.
  CompletionParams rf;
  ASSERT_FALSE(parse_completion_request(
      "{" + msgs + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer"}}}})",
      true, "m", rf));
  EXPECT_EQ(rf.structured.kind, StructuredOutput::Kind::kJsonSchema);
  EXPECT_EQ(nlohmann::json::parse(rf.structured.text), nlohmann::json({{"type", "integer"}}));
  for (const char* wrong : {R"({"type":"json_schema"})", R"({"type":"json_schema","json_schema":{"schema":3}})",
                            R"({"type":"xml"})", R"({})"})
    EXPECT_EQ(parse("{" + msgs + R"(,"response_format":)" + wrong + "}", true)->param, "response_format") << wrong;
  // vLLM's guided_*: on both endpoints; one constraint per request.
  CompletionParams gr;
  ASSERT_FALSE(parse_completion_request(R"({"prompt":"a","guided_regex":"[0-9]+"})", false, "m", gr));
  EXPECT_EQ(gr.structured.kind, StructuredOutput::Kind::kRegex);
  EXPECT_EQ(gr.structured.text, "[0-9]+");
  EXPECT_EQ(gr.structured_field, "guided_regex");
  EXPECT_EQ(parse(R"({"prompt":"a","guided_regex":"x","guided_grammar":"root ::= \"x\""})", false)->param,
            "guided_grammar");
  EXPECT_EQ(parse(R"({"prompt":"a","top_logprobs":1})", false)->param, "top_logprobs");  // a chat field
  EXPECT_EQ(parse("{" + msgs + R"(,"echo":true})", true)->param, "echo");                // a completions field
}

TEST(OpenAiProtocol, ParsesSamplingLogprobsAndChoices) {
  CompletionParams p;
  auto e = parse_completion_request(
      R"({"prompt":"a","n":3,"best_of":3,"logprobs":4,"echo":true,"presence_penalty":0.5,"frequency_penalty":-0.25,
          "logit_bias":{"17":-100,"3":2.5},"top_k":-1,"min_p":0.1,"typical_p":0.9,"repetition_penalty":1.2})",
      false, "m", p);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(p.n, 3);
  EXPECT_EQ(p.logprobs, 4);
  EXPECT_TRUE(p.echo);
  EXPECT_FLOAT_EQ(p.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.frequency_penalty, -0.25f);
  EXPECT_EQ(p.sampling.logit_bias, (std::map<int32_t, float>{{17, -100.0f}, {3, 2.5f}}));
  EXPECT_EQ(p.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.sampling.typical_p, 0.9f);
  EXPECT_FLOAT_EQ(p.sampling.repeat_penalty, 1.2f);
  EXPECT_EQ(p.sampling.seed, kRandomSeed);  // none given: each choice draws its own
  CompletionParams c;
  ASSERT_FALSE(parse_completion_request(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":5})",
                                        true, "m", c));
  EXPECT_EQ(c.logprobs, 5);
  // The library's checks, named as the request spells the field.
  c.sampling.repeat_penalty = 0;
  auto bad = check_sampling(c.sampling, 100);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->param, "repetition_penalty");
  c.sampling.repeat_penalty = 1;
  c.sampling.logit_bias = {{100, 1.0f}};
  EXPECT_EQ(check_sampling(c.sampling, 100)->param, "logit_bias");
}

// The README's table lists every field of the table the server checks, with
// the same handling.
TEST(OpenAiProtocol, TheReadmeTableListsEveryField) {
  std::ifstream f(LS_README);
  ASSERT_TRUE(f) << LS_README;
  const std::string readme((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const RequestField& field : request_fields()) {
    const std::string row = std::string("| `") + field.name + "` |";
    const size_t at = readme.find(row);
    ASSERT_NE(at, std::string::npos) << field.name << " is missing from the README's table";
    const std::string line = readme.substr(at, readme.find('\n', at) - at);
    const char* says = field.handling == FieldHandling::kHonoured ? "| honoured |"
                       : field.handling == FieldHandling::kRefused ? "| refused (400) |"
                                                                   : "| accepted, ignored |";
    EXPECT_NE(line.find(says), std::string::npos) << line;
  }
}

TEST(Jinja, SyntaxErrorsNameTheLine) {
  auto t = chat::jinja::Template::parse("line one\n{% for x in %}\n{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 2"), std::string::npos) << t.status().message();
  auto u = chat::jinja::Template::parse("{% if x %}never closed");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("endif"), std::string::npos) << u.status().message();
}

}  // namespace
}  // namespace layerstream::serve

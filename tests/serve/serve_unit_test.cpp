// Unit tests of the server's parts: stop-string streaming, request parsing,
// the chat template fallback and Jinja error reporting. (Jinja rendering is
// checked against Python's jinja2 in chat_templates_test.py.)
#include <gtest/gtest.h>

#include "runtime/serve/chat_template.h"
#include "runtime/serve/jinja.h"
#include "runtime/serve/openai_protocol.h"
#include "runtime/llama/text_stream.h"

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
  ASSERT_EQ(p.messages.size(), 2u);
  EXPECT_EQ(p.messages[1].content, "ab");
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
      {R"({"prompt":"a","n":2})", 400, "n"},
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

TEST(ChatTemplate, FallsBackToChatMlWithoutATemplate) {
  auto t = ChatTemplate::create("", "<s>", "</s>");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->is_fallback());
  auto text = t->apply({{"system", "S"}, {"user", "U"}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, RendersAFileTemplateWithBosAndRaisesItsErrors) {
  auto t = ChatTemplate::create(
      "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% "
      "endif %}"
      "[{{ m.role }}]{{ m.content | trim }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}",
      "<s>", "</s>");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto ok = t->apply({{"user", "  hi  "}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "<s>[user]hi[assistant]");
  auto bad = t->apply({{"system", "x"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no system"), std::string::npos);
}

TEST(Jinja, SyntaxErrorsNameTheLine) {
  auto t = jinja::Template::parse("line one\n{% for x in %}\n{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 2"), std::string::npos) << t.status().message();
  auto u = jinja::Template::parse("{% if x %}never closed");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("endif"), std::string::npos) << u.status().message();
}

}  // namespace
}  // namespace layerstream::serve

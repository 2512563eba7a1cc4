// HttpServer's phases as a router sees them, over 127.0.0.1: /health is 503
// ("loading") and generation requests 503 until serve_model(), 200 while
// serving, 503 ("draining") once shutdown() begins.
#include "runtime/serve/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <span>
#include <thread>

#include "layerstream/layerstream.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/model/example_model.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream::serve {
namespace {

// The tiny model on the host backend and a scheduler over it (aborts with
// the message when either fails).
std::pair<std::shared_ptr<Model>, std::unique_ptr<BatchScheduler>> open_tiny(
    const std::string& path, const SchedulerOptions& scheduling, int context) {
  ModelOptions mo;
  mo.backend = Backend::kHost;
  mo.host_threads = 1;
  mo.context = context;
  mo.sequences = scheduling.context_sequences();
  std::shared_ptr<Model> model = Model::open(path, mo).value();
  return {model, BatchScheduler::create(model, scheduling).value()};
}

// Shuts the server down and joins its thread when the test ends (also when
// an assertion returns early).
struct StopServer {
  HttpServer& server;
  std::thread& http;
  ~StopServer() {
    server.shutdown(std::chrono::seconds(5));
    http.join();
  }
};

// A server on a free port of 127.0.0.1 with ChatML, bound, not yet running.
std::unique_ptr<HttpServer> bound_server(const SchedulerOptions& scheduling) {
  auto tmpl = ChatTemplate::create("", "", "");
  EXPECT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  ServerOptions so;
  so.port = 0;
  so.model_id = "tiny";
  auto server = std::make_unique<HttpServer>(std::move(*tmpl), so, scheduling);
  EXPECT_TRUE(server->bind().ok());
  return server;
}

TEST(HttpServer, HealthFollowsLoadingServingAndDraining) {
  testing::TempDir dir;
  const std::string path = dir.file("tiny.gguf");
  ASSERT_TRUE(write_example_model(path, testing::tiny_llama_spec(GgmlType::F32, 3, 128)).ok());
  const SchedulerOptions sched_options{.parallel = 1, .queue = 2};
  auto owned = bound_server(sched_options);
  HttpServer& server = *owned;
  std::thread http([&] { EXPECT_TRUE(server.run().ok()); });
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);

  auto health = client.Get("/health");  // the model is not open yet
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(health->body, R"({"status":"loading"})");
  auto early = client.Post("/v1/completions", R"({"prompt":"hi","max_tokens":2})", "application/json");
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 503);
  EXPECT_NE(early->body.find("loading"), std::string::npos) << early->body;
  EXPECT_EQ(client.Get("/get_load")->body, R"({"load":0})");

  auto [model, sched] = open_tiny(path, sched_options, 64);
  ASSERT_TRUE(server.serve_model(model, *sched));
  EXPECT_EQ(client.Get("/health")->status, 200);
  auto done = client.Post("/v1/completions", R"({"prompt":"hi","max_tokens":2,"temperature":0})", "application/json");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200) << done->body;
  EXPECT_NE(done->body.find(R"("cached_tokens":0)"), std::string::npos) << done->body;

  // A long request runs while shutdown() drains: /health turns 503 at once.
  GenerationRequest long_one;
  long_one.prompt = {1, 2, 3};
  long_one.max_tokens = 50;
  auto running = sched->submit(long_one);
  ASSERT_TRUE(running.ok());
  std::thread stopper([&] { server.shutdown(std::chrono::seconds(60)); });
  while (server.phase() != ServerPhase::kDraining) std::this_thread::yield();
  auto draining = client.Get("/health");
  if (draining) {  // the listener may already have stopped when the request ran short
    EXPECT_EQ(draining->status, 503);
    EXPECT_EQ(draining->body, R"({"status":"draining"})");
  }
  stopper.join();
  http.join();
  EXPECT_TRUE((*running)->done());
  EXPECT_FALSE(server.serve_model(model, *sched)) << "no serving after shutdown";
}

// A chat request with tools and tool history over HTTP: the tools and the
// earlier call reach the template (the prompt is exactly the rendered
// conversation), the reply is parsed (the tiny model's random text holds no
// call: content, finish "stop"), streamed it ends with a finish reason and
// [DONE]; tool_choice "required" forces a call.
TEST(HttpServer, ChatWithToolsRendersThemAndForcesACallWhenRequired) {
  testing::TempDir dir;
  const std::string path = dir.file("tiny.gguf");
  ASSERT_TRUE(write_example_model(path, testing::tiny_llama_spec(GgmlType::F32, 3, 1024)).ok());
  auto tmpl = ChatTemplate::for_file(path);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  ServerOptions so;
  so.port = 0;
  so.model_id = "tiny";
  const SchedulerOptions sched_options{.parallel = 1, .queue = 2};
  HttpServer server(*tmpl, so, sched_options);
  ASSERT_TRUE(server.bind().ok());
  std::thread http([&] { EXPECT_TRUE(server.run().ok()); });
  // 1024 positions: the tools and the history are ~700 tokens of the tiny vocabulary.
  auto [model, sched] = open_tiny(path, sched_options, 1024);
  ASSERT_TRUE(server.serve_model(model, *sched));
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);

  const std::string tools =
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])";
  const std::string messages =
      R"([{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1",
          "type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}}]},
          {"role":"tool","tool_call_id":"call_1","content":"cold"}])";
  auto reply =
      client.Post("/v1/chat/completions",
                  R"({"max_tokens":3,"temperature":0,"messages":)" + messages + R"(,"tools":)" + tools + "}",
                  "application/json");
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200) << reply->body;
  const nlohmann::json body = nlohmann::json::parse(reply->body);
  auto prompt = tmpl->apply(
      {{.role = "user", .content = "Weather?"},
       {.role = "assistant",
        .tool_calls = {{.id = "call_1", .name = "get_weather", .arguments = R"({"city": "Oslo"})"}}},
       {.role = "tool", .content = "cold", .tool_call_id = "call_1"}},
      {.tools_json = tools, .leave_bos_to_tokenizer = true});
  ASSERT_TRUE(prompt.ok());
  EXPECT_NE(prompt->find("<tools>"), std::string::npos);
  EXPECT_NE(prompt->find("\"arguments\": {\"city\": \"Oslo\"}"), std::string::npos) << *prompt;
  EXPECT_EQ(body["usage"]["prompt_tokens"], model->tokenize(*prompt, true).size()) << *prompt;
  const nlohmann::json& choice = body["choices"][0];
  EXPECT_TRUE(choice["message"]["content"].is_string()) << body;
  EXPECT_FALSE(choice["message"].contains("tool_calls")) << body;
  EXPECT_NE(choice["finish_reason"], "tool_calls");

  auto streamed =
      client.Post("/v1/chat/completions",
                  R"({"max_tokens":3,"stream":true,"messages":)" + messages + R"(,"tools":)" + tools + "}",
                  "application/json");
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  EXPECT_NE(streamed->body.find(R"("finish_reason":"length")"), std::string::npos) << streamed->body;
  EXPECT_TRUE(streamed->body.ends_with("data: [DONE]\n\n")) << streamed->body;

  // tool_choice "required": the grammar makes even random text one call of
  // the tool with arguments its schema allows. Without the grammar engine:
  // a 400 naming tool_choice.
  const std::string city_tool =
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
      R"("properties":{"city":{"enum":["Oslo","Paris"]}},"required":["city"],"additionalProperties":false}}}])";
  const std::string forcing = R"({"max_tokens":250,"temperature":1,"seed":5,"parallel_tool_calls":false)";
  auto required = client.Post("/v1/chat/completions",
                              forcing + R"(,"messages":)" + messages + R"(,"tools":)" + city_tool +
                                  R"(,"tool_choice":"required"})",
                              "application/json");
  ASSERT_TRUE(required);
  const nlohmann::json forced = nlohmann::json::parse(required->body);
  if (!grammar::structured_output_available()) {
    EXPECT_EQ(required->status, 400);
    EXPECT_EQ(forced["error"]["param"], "tool_choice") << required->body;
  } else {
    ASSERT_EQ(required->status, 200) << required->body;
    const nlohmann::json& fc = forced["choices"][0];
    EXPECT_EQ(fc["finish_reason"], "tool_calls") << required->body;
    ASSERT_EQ(fc["message"]["tool_calls"].size(), 1u) << required->body;
    EXPECT_EQ(fc["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    const nlohmann::json arguments =
        nlohmann::json::parse(fc["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
    EXPECT_TRUE(arguments == nlohmann::json({{"city", "Oslo"}}) || arguments == nlohmann::json({{"city", "Paris"}}))
        << arguments;
  }
  server.shutdown(std::chrono::seconds(5));
  http.join();
}

// The sampling, logprobs and choice fields over HTTP on a tiny model: chat
// logprobs with top_logprobs equal the log-softmax of the logits one
// Context::decode over prompt and answer gives (<= 1e-4); n = 2 gives two
// choices; completions echo the prompt with its logprobs; max_tokens past
// the context is a 400 naming it; /tokenize and /detokenize round-trip.
TEST(HttpServer, LogprobsChoicesEchoTokenize) {
  testing::TempDir dir;
  const std::string path = dir.file("tiny.gguf");
  ASSERT_TRUE(write_example_model(path, testing::tiny_llama_spec(GgmlType::F32, 5, 128)).ok());
  const SchedulerOptions sched_options{.parallel = 2, .queue = 2};
  auto owned = bound_server(sched_options);
  HttpServer& server = *owned;
  std::thread http([&] { EXPECT_TRUE(server.run().ok()); });
  ModelOptions mo;
  mo.backend = Backend::kHost;
  mo.host_threads = 1;
  mo.context = 256;
  mo.sequences = sched_options.context_sequences() + 1;  // one more for the reference context
  auto model = Model::open(path, mo);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto sched = BatchScheduler::create(*model, sched_options);
  ASSERT_TRUE(sched.ok());
  ASSERT_TRUE(server.serve_model(*model, **sched));
  const StopServer stop{server, http};
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  auto post = [&](const char* route, const nlohmann::json& body) {
    auto r = client.Post(route, body.dump(), "application/json");
    EXPECT_TRUE(r);
    return r ? std::make_pair(r->status, nlohmann::json::parse(r->body)) : std::make_pair(0, nlohmann::json());
  };

  // /tokenize of the chat prompt, to check the logprobs against.
  const nlohmann::json messages = {{{"role", "user"}, {"content", "Hi"}}};
  auto [tst, tok] = post("/tokenize", {{"messages", messages}});
  ASSERT_EQ(tst, 200) << tok.dump();
  std::vector<int32_t> all = tok["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(tok["count"], all.size());
  auto [st, chat] = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 5}, {"logprobs", true},
                                                  {"top_logprobs", 3}, {"temperature", 0}});
  ASSERT_EQ(st, 200) << chat.dump();
  const nlohmann::json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), chat["usage"]["completion_tokens"].get<size_t>());
  // Greedy: the reference follows the argmax, one decode per token.
  auto ref = (*model)->create_context();
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  Batch b;
  b.add_sequence(all, 0, 0);
  for (size_t j = 0; j < content.size(); ++j) {
    ASSERT_TRUE((*ref)->decode(b).ok());
    const std::span<const float> row = (*ref)->logits(static_cast<int>(b.size()) - 1);
    const int32_t id = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    EXPECT_EQ(content[j]["token"], (*model)->detokenize({id})) << j;
    EXPECT_NEAR(content[j]["logprob"].get<double>(), testing::log_softmax_at(row, id), 1e-4) << j;
    ASSERT_EQ(content[j]["top_logprobs"].size(), 3u);
    EXPECT_NEAR(content[j]["top_logprobs"][0]["logprob"].get<double>(), content[j]["logprob"].get<double>(), 1e-6);
    b.clear();
    b.add(id, static_cast<int32_t>(all.size() + j), 0, true);
  }

  auto [nst, two] = post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 3}, {"n", 2}, {"temperature", 0}});
  ASSERT_EQ(nst, 200) << two.dump();
  ASSERT_EQ(two["choices"].size(), 2u);
  EXPECT_EQ(two["choices"][1]["index"], 1);
  EXPECT_EQ(two["choices"][0]["text"], two["choices"][1]["text"]);  // greedy: the same text
  EXPECT_EQ(post("/v1/completions", {{"prompt", "Hello"}, {"n", 3}}).second["error"]["param"], "n");

  auto [est, echo] = post("/v1/completions", {{"prompt", "Hello there"}, {"max_tokens", 0}, {"echo", true},
                                             {"logprobs", 1}});
  ASSERT_EQ(est, 200) << echo.dump();
  EXPECT_EQ(echo["choices"][0]["text"], "Hello there");
  const nlohmann::json& lp = echo["choices"][0]["logprobs"];
  auto [pst, ptok] = post("/tokenize", {{"prompt", "Hello there"}});
  ASSERT_EQ(lp["token_logprobs"].size(), ptok["count"].get<size_t>());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_EQ(lp["text_offset"][0], 0);  // echo: offsets count from the prompt's start
  auto [ost, offs] = post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 3}, {"logprobs", 0},
                                             {"temperature", 0}});
  ASSERT_EQ(ost, 200) << offs.dump();
  const nlohmann::json& gen = offs["choices"][0]["logprobs"];
  ASSERT_EQ(gen["tokens"].size(), offs["usage"]["completion_tokens"].get<size_t>());
  EXPECT_EQ(gen["text_offset"][0], 5);  // after "Hello"
  // Each token advances the offset by its bytes (the JSON text of a token
  // that is part of a UTF-8 character is U+FFFD, so compare the order only).
  for (size_t i = 1; i < gen["tokens"].size(); ++i)
    EXPECT_GE(gen["text_offset"][i].get<size_t>(), gen["text_offset"][i - 1].get<size_t>()) << i;
  EXPECT_LT(lp["token_logprobs"][1].get<double>(), 0);

  auto [mst, too_long] = post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 300}});
  EXPECT_EQ(mst, 400);
  EXPECT_EQ(too_long["error"]["param"], "max_tokens");
  EXPECT_EQ(too_long["error"]["code"], "context_length_exceeded");

  auto [dst, text] = post("/detokenize", {{"tokens", ptok["tokens"]}});
  ASSERT_EQ(dst, 200);
  EXPECT_NE(text["prompt"].get<std::string>().find("Hello there"), std::string::npos) << text.dump();
  EXPECT_EQ(post("/detokenize", {{"tokens", {1, -3}}}).second["error"]["param"], "tokens");
  EXPECT_EQ(post("/tokenize", {{"prompt", 5}}).second["error"]["param"], "prompt");
  auto [embst, embeddings] = post("/v1/embeddings", {{"input", "Hello"}, {"model", "tiny"}});
  EXPECT_EQ(embst, 501);
  EXPECT_EQ(embeddings["error"]["code"], "not_implemented") << embeddings.dump();
}

}  // namespace
}  // namespace layerstream::serve

namespace layerstream::serve {
namespace {

// response_format over HTTP on the tiny model (a token per byte, pseudo-
// random logits): at temperature 1 every choice is JSON the schema allows;
// a schema the engine cannot compile, or a build without it, is a 400
// naming response_format.
TEST(HttpServer, ResponseFormatJsonSchemaHoldsAndBadSchemaIs400) {
  testing::TempDir dir;
  const std::string path = dir.file("tiny.gguf");
  ASSERT_TRUE(write_example_model(path, testing::tiny_llama_spec(GgmlType::F32, 9, 512)).ok());
  const SchedulerOptions sched_options{.parallel = 2, .queue = 2};
  auto owned = bound_server(sched_options);
  HttpServer& server = *owned;
  std::thread http([&] { EXPECT_TRUE(server.run().ok()); });
  auto [model, sched] = open_tiny(path, sched_options, 384);
  ASSERT_TRUE(server.serve_model(model, *sched));
  const StopServer stop{server, http};
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  auto post = [&](const nlohmann::json& body) {
    auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    return r ? std::make_pair(r->status, nlohmann::json::parse(r->body)) : std::make_pair(0, nlohmann::json());
  };
  const nlohmann::json schema = {
      {"type", "object"},
      {"properties", {{"size", {{"enum", {"S", "M", "L"}}}}, {"n", {{"type", "integer"}}}}},
      {"required", {"size", "n"}}};
  nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", "Reply in JSON"}}}},
                         {"max_tokens", 250},
                         {"temperature", 1},
                         {"seed", 11},
                         {"n", 2},
                         {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "t"}, {"schema", schema}}}}}};
  if (!grammar::structured_output_available()) {
    auto [st, err] = post(body);
    EXPECT_EQ(st, 400) << err.dump();
    EXPECT_EQ(err["error"]["param"], "response_format");
    GTEST_SKIP() << "built without the grammar engine: checked the 400 only";
  }
  auto [st, reply] = post(body);
  ASSERT_EQ(st, 200) << reply.dump();
  ASSERT_EQ(reply["choices"].size(), 2u);
  for (const auto& choice : reply["choices"]) {
    const std::string text = choice["message"]["content"];
    EXPECT_EQ(choice["finish_reason"], "stop") << text;
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_EQ(j.size(), 2u) << text;
    EXPECT_TRUE(j["size"] == "S" || j["size"] == "M" || j["size"] == "L") << text;
    EXPECT_TRUE(j["n"].is_number_integer()) << text;
  }
  body["response_format"] = {{"type", "json_object"}};
  body["n"] = 1;
  auto [ost, object] = post(body);
  ASSERT_EQ(ost, 200) << object.dump();
  EXPECT_TRUE(nlohmann::json::parse(object["choices"][0]["message"]["content"].get<std::string>(), nullptr, false)
                  .is_object())
      << object.dump();

  body["response_format"] = {{"type", "json_schema"},
                             {"json_schema", {{"schema", {{"type", "object"}, {"properties", 7}}}}}};
  auto [bst, bad] = post(body);
  EXPECT_EQ(bst, 400) << bad.dump();
  EXPECT_EQ(bad["error"]["param"], "response_format");
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("json_schema"), std::string::npos) << bad.dump();
  body["response_format"] = {{"type", "yaml"}};
  EXPECT_EQ(post(body).second["error"]["param"], "response_format");

  // vLLM's guided_regex on /v1/completions.
  auto r = client.Post("/v1/completions",
                       nlohmann::json({{"prompt", "Say"}, {"max_tokens", 20}, {"seed", 3}, {"guided_regex", "(yes|no)!"}})
                           .dump(),
                       "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string said = nlohmann::json::parse(r->body)["choices"][0]["text"];
  EXPECT_TRUE(said == "yes!" || said == "no!") << said;
}

}  // namespace
}  // namespace layerstream::serve

// HttpServer's phases as a router sees them, over 127.0.0.1: /health is 503
// ("loading") and generation requests 503 until serve_model(), 200 while
// serving, 503 ("draining") once shutdown() begins.
#include "runtime/serve/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "layerstream/layerstream.h"
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

TEST(HttpServer, HealthFollowsLoadingServingAndDraining) {
  testing::TempDir dir;
  const std::string path = dir.file("tiny.gguf");
  ASSERT_TRUE(write_example_model(path, testing::tiny_llama_spec(GgmlType::F32, 3, 128)).ok());
  auto tmpl = ChatTemplate::create("", "", "");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  ServerOptions so;
  so.port = 0;
  so.model_id = "tiny";
  const SchedulerOptions sched_options{.parallel = 1, .queue = 2};
  HttpServer server(std::move(*tmpl), so, sched_options);
  ASSERT_TRUE(server.bind().ok());
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
// [DONE]; what cannot be honoured is a 400 naming the field.
TEST(HttpServer, ChatWithToolsRendersThemAndRefusesWhatItCannotHonour) {
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

  auto required =
      client.Post("/v1/chat/completions",
                  R"({"messages":)" + messages + R"(,"tools":)" + tools + R"(,"tool_choice":"required"})",
                  "application/json");
  ASSERT_TRUE(required);
  EXPECT_EQ(required->status, 400);
  EXPECT_EQ(nlohmann::json::parse(required->body)["error"]["param"], "tool_choice") << required->body;
  server.shutdown(std::chrono::seconds(5));
  http.join();
}

}  // namespace
}  // namespace layerstream::serve

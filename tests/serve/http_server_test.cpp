// HttpServer's phases as a router sees them, over 127.0.0.1: /health is 503
// ("loading") and generation requests 503 until serve_model(), 200 while
// serving, 503 ("draining") once shutdown() begins.
#include "runtime/serve/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "layerstream/layerstream.h"
#include "runtime/model/example_model.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream::serve {
namespace {

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

  ModelOptions mo;
  mo.backend = Backend::kHost;
  mo.host_threads = 1;
  mo.context = 64;
  mo.sequences = sched_options.context_sequences();
  auto model = Model::open(path, mo);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto sched = BatchScheduler::create(*model, sched_options);
  ASSERT_TRUE(sched.ok());
  ASSERT_TRUE(server.serve_model(*model, **sched));
  EXPECT_EQ(client.Get("/health")->status, 200);
  auto done = client.Post("/v1/completions", R"({"prompt":"hi","max_tokens":2,"temperature":0})", "application/json");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200) << done->body;
  EXPECT_NE(done->body.find(R"("cached_tokens":0)"), std::string::npos) << done->body;

  // A long request runs while shutdown() drains: /health turns 503 at once.
  GenerationRequest long_one;
  long_one.prompt = {1, 2, 3};
  long_one.max_tokens = 50;
  auto running = (*sched)->submit(long_one);
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
  EXPECT_FALSE(server.serve_model(*model, **sched)) << "no serving after shutdown";
}

}  // namespace
}  // namespace layerstream::serve

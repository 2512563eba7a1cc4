// The OpenAI-compatible HTTP front end of `layerstream serve` (cpp-httplib):
// POST /v1/completions and /v1/chat/completions (JSON or server-sent events),
// GET /v1/models, /health and /metrics (Prometheus text). Requests become
// GenerationRequests on a BatchScheduler; a client that goes away cancels its
// request, which frees its sequence.
//
// Thread safety: run() blocks on the calling thread; shutdown() may be called
// from any thread (it drains the scheduler, then stops the listener).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layerstream/model.h"
#include "layerstream/status.h"
#include "runtime/serve/batch_scheduler.h"
#include "runtime/serve/chat_template.h"
#include "runtime/serve/openai_protocol.h"
#include "runtime/serve/request.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace layerstream::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (port() says which)
  std::string api_key;              // empty: no key needed
  std::string model_id;             // the id clients name in "model"
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  int default_max_tokens = 256;     // when a request gives none (capped by the context)
  int http_threads = 0;             // 0: enough for every sequence and queued request
};

class HttpServer {
 public:
  HttpServer(std::shared_ptr<Model> model, BatchScheduler& scheduler, ChatTemplate chat_template,
             ServerOptions options);
  ~HttpServer();

  // Binds host:port (IOError naming them when it cannot), then serves until
  // shutdown().
  Status bind();
  Status run();
  int port() const { return port_; }
  // Stops accepting new generation requests (they get 503), lets running
  // ones finish for up to `grace`, then stops the listener; run() returns.
  void shutdown(std::chrono::milliseconds grace);

 private:
  void routes();
  void install_guards();
  // /v1/completions (chat false) and /v1/chat/completions.
  void complete(const httplib::Request& req, httplib::Response& res, bool chat);
  std::optional<ApiError> prompt_tokens(CompletionParams& p, bool chat, std::vector<int32_t>& tokens);
  void stream_response(httplib::Response& res, std::shared_ptr<RequestState> st, const ResponseIds& ids, bool chat,
                       bool include_usage);
  std::string render_metrics() const;

  std::shared_ptr<Model> model_;
  BatchScheduler& scheduler_;
  ChatTemplate template_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<bool> stopping_{false}, finished_{false};
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> http_requests_{0}, http_errors_{0};
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace layerstream::serve

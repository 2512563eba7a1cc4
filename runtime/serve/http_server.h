// The OpenAI-compatible HTTP front end of `layerstream serve` (cpp-httplib):
// POST /v1/completions and /v1/chat/completions (JSON or server-sent events),
// POST /tokenize and /detokenize (vLLM's shapes),
// GET /v1/models, /metrics (Prometheus text: layerstream_* and the vllm:*
// names gateways scrape), and for routers /health (200 only while requests
// are admitted: 503 while the model loads and while draining), /load and
// /get_load (running + waiting requests). Requests become GenerationRequests
// on a BatchScheduler; a client that goes away cancels its request, which
// frees its sequence. None of the GET routes waits for a pass: they read
// atomics and the scheduler's counters, so they answer under full load.
//
// Life: construct, bind(), run() (on a thread of its own while the model
// loads: /health says 503), serve_model() once the model is open, then
// shutdown() from any thread.
//
// Thread safety: run() blocks on the calling thread; serve_model() and
// shutdown() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "layerstream/chat.h"
#include "layerstream/model.h"
#include "layerstream/status.h"
#include "runtime/serve/batch_scheduler.h"
#include "runtime/serve/chat_response.h"
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
  std::string cors_origin;          // non-empty: Access-Control-Allow-Origin, and OPTIONS preflights
};

// What /health says: requests are admitted only while serving.
enum class ServerPhase { kLoading, kServing, kDraining };

class HttpServer {
 public:
  // `scheduling`: the scheduler's options, to size the HTTP thread pool.
  HttpServer(ChatTemplate chat_template, ServerOptions options, const SchedulerOptions& scheduling);
  ~HttpServer();

  // Binds host:port (IOError naming them when it cannot), then serves until
  // shutdown().
  Status bind();
  Status run();
  int port() const { return port_; }
  // The model is open: generation requests are admitted from now on.
  // `scheduler` must outlive run(). False (nothing served) when shutdown()
  // came first.
  bool serve_model(std::shared_ptr<Model> model, BatchScheduler& scheduler);
  // Stops accepting new generation requests (they get 503, and so does
  // /health), lets running ones finish for up to `grace`, then stops the
  // listener; run() returns.
  void shutdown(std::chrono::milliseconds grace);
  ServerPhase phase() const { return phase_.load(); }

 private:
  void routes();
  void install_guards();
  // /v1/completions (chat false) and /v1/chat/completions.
  void complete(const httplib::Request& req, httplib::Response& res, bool chat);
  std::optional<ApiError> prompt_tokens(CompletionParams& p, bool chat, std::vector<int32_t>& tokens);
  std::optional<ApiError> check_structured(const StructuredOutput& structured, const std::string& param) const;
  std::optional<ApiError> force_tool_calls(CompletionParams& p) const;
  std::optional<ApiError> generation_request(const CompletionParams& p, std::vector<int32_t> tokens,
                                             GenerationRequest& g) const;
  // How a request's choices are written.
  struct ChoiceFormat {
    bool chat = false;
    std::string echo;       // completions with echo: the prompt, before the text
    bool logprobs = false;  // logprobs asked
    int32_t first_token = 0;  // the prompt's first token (echoed logprobs)
    size_t prompt_bytes = 0;  // completions without echo: where the text's offsets start
    ToolCallRules tools;      // chat: how the reply's tool calls are parsed (format kNone: not at all)
  };
  // How the reply's tool calls are parsed (format kNone: not at all).
  ToolCallRules tool_call_rules(const CompletionParams& p, bool chat) const;
  // `text_offset`: completions' offset of the chunk's first token, advanced past its tokens.
  nlohmann::json choice_logprobs(const ChoiceFormat& f, const RequestState::Chunk& c, bool first,
                                 size_t& text_offset) const;
  void stream_response(httplib::Response& res, std::vector<std::shared_ptr<RequestState>> states,
                       const ResponseIds& ids, const ChoiceFormat& format, bool include_usage);
  // `calls`: the choice's held text when the format parses tool calls.
  std::string stream_events(const ChoiceFormat& f, const ResponseIds& ids, int index, const RequestState::Chunk& c,
                            bool first, size_t& text_offset, ToolCallStream& calls) const;
  // POST /tokenize and /detokenize (vLLM's shapes).
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void cors_routes();
  // The scheduler while serving or draining; null while the model loads.
  BatchScheduler* scheduler() const { return scheduler_.load(std::memory_order_acquire); }
  int load() const;  // running + waiting requests

  std::shared_ptr<Model> model_;                 // set before scheduler_
  std::atomic<BatchScheduler*> scheduler_{nullptr};
  ChatTemplate template_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::mutex phase_mu_;  // serve_model() against shutdown()
  std::atomic<ServerPhase> phase_{ServerPhase::kLoading};
  std::atomic<bool> finished_{false};
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> http_requests_{0}, http_errors_{0};
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace layerstream::serve

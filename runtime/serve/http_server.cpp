#include "runtime/serve/http_server.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/serve/metrics_text.h"
#include "runtime/serve/openai_protocol.h"

namespace layerstream::serve {
namespace {

using nlohmann::json;

std::string to_text(const json& j);

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  res.set_content(to_text(e.body()), "application/json");
}

ApiError error_of(int http_status, std::string message, std::string type, std::string code = {}) {
  ApiError e;
  e.http_status = http_status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

// A scheduler refusal as the client sees it.
ApiError error_of(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      return error_of(400, st.message(), "invalid_request_error", "context_length_exceeded");
    case StatusCode::kOutOfBudget:
      return error_of(503, st.message(), "server_busy", "server_busy");
    case StatusCode::kCancelled:
      return error_of(503, st.message(), "server_shutting_down", "server_shutting_down");
    default:
      return error_of(500, st.ToString(), "server_error");
  }
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Generated text may hold bytes that are not UTF-8 (a model can emit any
// byte token): they become U+FFFD rather than failing the response.
std::string to_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string sse(const json& j) { return "data: " + to_text(j) + "\n\n"; }

}  // namespace

HttpServer::HttpServer(ChatTemplate chat_template, ServerOptions options, const SchedulerOptions& scheduling)
    : template_(std::move(chat_template)), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  // Every running and queued request holds an HTTP thread while it streams;
  // a few more answer /health, /metrics, /load and refusals.
  const int threads =
      options_.http_threads > 0 ? options_.http_threads : scheduling.parallel + scheduling.queue + 8;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  routes();
}

HttpServer::~HttpServer() = default;

Status HttpServer::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ <= 0) return Status::IOError("cannot bind " + options_.host + " on any port");
  } else {
    if (!http_->bind_to_port(options_.host, options_.port))
      return Status::IOError("cannot bind " + options_.host + ":" + std::to_string(options_.port) +
                             " (in use, or not an address of this host; try another --port or --port 0)");
    port_ = options_.port;
  }
  return Status::OK();
}

Status HttpServer::run() {
  const bool ok = phase_ == ServerPhase::kDraining || http_->listen_after_bind();
  finished_ = true;
  if (!ok) return Status::IOError("the HTTP listener on port " + std::to_string(port_) + " failed");
  return Status::OK();
}

bool HttpServer::serve_model(std::shared_ptr<Model> model, BatchScheduler& scheduler) {
  std::lock_guard lock(phase_mu_);
  if (phase_ == ServerPhase::kDraining) return false;
  model_ = std::move(model);
  scheduler_.store(&scheduler, std::memory_order_release);
  phase_ = ServerPhase::kServing;
  return true;
}

void HttpServer::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(phase_mu_);
    phase_ = ServerPhase::kDraining;  // /health says 503 from here on
  }
  if (BatchScheduler* sched = scheduler()) sched->drain(grace);
  // Running streams have ended; give their handlers a moment to send the end.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // stop() is a no-op until the listener runs: repeat until run() returned.
  for (int i = 0; i < 200 && !finished_; ++i) {
    http_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int HttpServer::load() const {
  const BatchScheduler* sched = scheduler();
  if (!sched) return 0;
  const SchedulerMetrics m = sched->metrics();
  return m.active + m.queued;
}

void HttpServer::routes() {
  install_guards();
  httplib::Server& s = *http_;
  // What routers poll: only a 2xx /health gets requests sent here.
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const ServerPhase phase = phase_.load();
    if (phase != ServerPhase::kServing) res.status = 503;
    res.set_content(phase == ServerPhase::kServing   ? R"({"status":"ok"})"
                    : phase == ServerPhase::kLoading ? R"({"status":"loading"})"
                                                     : R"({"status":"draining"})",
                    "application/json");
  });
  s.Get("/load", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(to_text({{"server_load", load()}}), "application/json");
  });
  s.Get("/get_load", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(to_text({{"load", load()}}), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const BatchScheduler* sched = scheduler();
    const HttpCounters http{http_requests_.load(), http_errors_.load(),
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()};
    res.set_content(render_metrics(sched ? sched->metrics() : SchedulerMetrics{}, http, options_.model_id),
                    "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json body = {{"object", "list"},
                       {"data", json::array({{{"id", options_.model_id},
                                              {"object", "model"},
                                              {"created", unix_seconds()},
                                              {"owned_by", "layerstream"}}})}};
    res.set_content(to_text(body), "application/json");
  });

  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, false); });
  s.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, true); });
  if (!options_.cors_origin.empty()) cors_routes();
}

// A browser page on another origin may call us: every response names the
// allowed origin, and preflight OPTIONS requests get the methods and headers.
void HttpServer::cors_routes() {
  httplib::Server& s = *http_;
  s.set_default_headers({{"Access-Control-Allow-Origin", options_.cors_origin}, {"Vary", "Origin"}});
  s.Options(R"(/.*)", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    res.set_header("Access-Control-Max-Age", "86400");
  });
}

// The API key check, and our error body for what the routes do not answer.
void HttpServer::install_guards() {
  httplib::Server& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    ++http_requests_;
    // Routers' probes and CORS preflights (browsers send them without credentials) need no key.
    const bool open = req.path == "/health" || req.path == "/load" || req.path == "/get_load" ||
                      req.method == "OPTIONS";
    if (options_.api_key.empty() || open) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (auth != "Bearer " + options_.api_key) {
      send_error(res, error_of(401,
                               auth.empty() ? "no API key given: send 'Authorization: Bearer KEY'"
                                            : "the API key is not valid",
                               "invalid_request_error", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // Status codes without a body of ours (404 route, 413 body too large, ...).
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    ++http_errors_;
    if (!res.body.empty()) return;
    std::string msg = res.status == 404   ? "no route " + req.method + " " + req.path
                      : res.status == 413 ? "the body is larger than the server accepts (" +
                                                std::to_string(options_.max_body_bytes) + " bytes)"
                                          : "HTTP error " + std::to_string(res.status);
    send_error(res, error_of(res.status, msg, "invalid_request_error"));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, error_of(500, "internal error: " + what, "server_error"));
  });
}

// The prompt's tokens: the chat template over the messages (its turn ends
// become stop strings), or the completion prompt as it is.
std::optional<ApiError> HttpServer::prompt_tokens(CompletionParams& p, bool chat, std::vector<int32_t>& tokens) {
  if (chat) {
    if (p.conversation.tool_choice == ToolChoice::kAuto &&
        template_.tool_call_format() == ToolCallFormat::kNone) {
      ApiError e =
          error_of(400,
                   "the model's chat template writes tool calls in a format this server does not parse "
                   "(it parses hermes, llama3 and mistral; --chat-template chooses another template)",
                   "invalid_request_error");
      e.param = "tools";
      return e;
    }
    auto text = template_.apply(p.conversation.messages,
                                {.tools_json = p.conversation.tools_json, .leave_bos_to_tokenizer = true});
    if (!text.ok())
      return error_of(400, text.status().message(), "invalid_request_error");
    tokens = model_->tokenize(*text, /*add_bos=*/true);
    for (const std::string& end : template_.turn_ends()) p.stop.push_back(end);
  } else {
    if (p.prompt.empty())
      return error_of(400, "'prompt' is empty", "invalid_request_error");
    tokens = model_->tokenize(p.prompt, /*add_bos=*/true);
  }
  return std::nullopt;
}

void HttpServer::complete(const httplib::Request& req, httplib::Response& res, bool chat) {
  BatchScheduler* sched = scheduler();
  if (!sched)
    return send_error(res, error_of(503, "the model is still loading; retry when /health answers 200",
                                    "server_loading", "server_loading"));
  BatchScheduler& scheduler = *sched;
  CompletionParams p;
  if (auto e = parse_completion_request(req.body, chat, options_.model_id, p)) return send_error(res, *e);
  std::vector<int32_t> tokens;
  if (auto e = prompt_tokens(p, chat, tokens)) return send_error(res, *e);
  const int n_ctx = scheduler.n_context();
  const int room = n_ctx - static_cast<int>(tokens.size());
  GenerationRequest g;
  g.prompt = std::move(tokens);
  g.max_tokens = p.max_tokens >= 0 ? p.max_tokens : options_.default_max_tokens;
  g.max_tokens = std::min(g.max_tokens, std::max(room, 0));
  g.sampling = p.sampling;
  g.stop = p.stop;
  if (g.max_tokens == 0 && room > 0) {  // nothing to generate: answer at once
    RequestState::Chunk none;
    none.done = true;
    none.reason = FinishReason::kLength;
    none.prompt_tokens = static_cast<int>(g.prompt.size());
    const ResponseIds ids{(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++), p.model,
                          unix_seconds()};
    res.set_content(to_text(completion_response(ids, chat, none)), "application/json");
    return;
  }
  auto state = scheduler.submit(std::move(g));
  if (!state.ok()) return send_error(res, error_of(state.status()));
  const ResponseIds ids{(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++), p.model,
                        unix_seconds()};
  std::shared_ptr<RequestState> st = *state;

  if (!p.stream) {
    const RequestState::Chunk all = st->wait_all();
    if (all.reason == FinishReason::kError)
      return send_error(res, error_of(500, all.error, "server_error"));
    if (all.reason == FinishReason::kCancelled)
      return send_error(
          res, error_of(503, all.error.empty() ? "cancelled" : all.error, "server_shutting_down"));
    json body = completion_response(ids, chat, all);
    if (const ToolCallRules rules = tool_call_rules(p, chat); rules.format != ToolCallFormat::kNone) {
      ChatOutput out = parse_tool_calls(rules.format, all.text);
      apply_rules(rules, out);
      set_chat_output(body, out);
    }
    res.set_content(to_text(body), "application/json");
    return;
  }
  stream_response(res, st, ids, chat, p.include_usage, tool_call_rules(p, chat));
}

ToolCallRules HttpServer::tool_call_rules(const CompletionParams& p, bool chat) const {
  if (!chat || p.conversation.tool_choice != ToolChoice::kAuto) return {};
  return {template_.tool_call_format(), p.conversation.parallel_tool_calls};
}

// Server-sent events: a chunk per piece of text, the finish reason, usage
// when asked, [DONE]; a client that goes away cancels its request. With tool
// calls parsed, text that may be a call is held (ToolCallStream) and the
// calls go out as one tool_calls delta before the finish reason.
void HttpServer::stream_response(httplib::Response& res, std::shared_ptr<RequestState> st,
                                 const ResponseIds& ids, bool chat, bool include_usage,
                                 const ToolCallRules& tools) {
  auto first = std::make_shared<bool>(true);
  auto calls = std::make_shared<ToolCallStream>(tools.format);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, ids, chat, first, include_usage, tools, calls](size_t, httplib::DataSink& sink) {
        RequestState::Chunk c;
        if (!st->next(c, std::chrono::milliseconds(500))) {
          // Nothing yet: a comment line keeps the stream alive and finds
          // a client that went away (the write fails).
          if (!sink.write(":\n\n", 3)) {
            st->cancel();
            return false;
          }
          return true;
        }
        std::string out;
        const std::string shown = calls->feed(c.text);
        if (!shown.empty() || *first) out += sse(stream_chunk(ids, chat, shown, *first, FinishReason::kNone));
        *first = false;
        if (c.done) {
          const HeldReply held = finish_streamed_reply(*calls, tools, ids);
          for (const json& chunk : held.chunks) out += sse(chunk);
          if (c.reason == FinishReason::kError || c.reason == FinishReason::kCancelled) {
            out +=
                sse(error_of(c.reason == FinishReason::kError ? 500 : 503, c.error,
                             c.reason == FinishReason::kError ? "server_error" : "server_shutting_down")
                        .body());
          } else {
            json end = stream_chunk(ids, chat, "", false, c.reason);
            if (held.has_calls) finish_with_tool_calls(end);
            out += sse(end);
            if (include_usage) {
              json u = stream_chunk(ids, chat, "", false, FinishReason::kNone);
              u["choices"] = json::array();
              u["usage"] = usage_json(c);
              out += sse(u);
            }
          }
          out += "data: [DONE]\n\n";
        }
        // Nothing to send (text held as a possible tool call): an empty
        // write would be the chunked encoding's end of body.
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          st->cancel();
          return false;
        }
        if (c.done) sink.done();
        return true;
      },
      [st](bool success) {
        if (!success) st->cancel();  // the client went away: free its sequence
      });
}

}  // namespace layerstream::serve

#include "runtime/serve/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/serve/metrics_text.h"
#include "runtime/serve/openai_protocol.h"

namespace layerstream::serve {
namespace {

using nlohmann::json;

std::string to_text(const json& j);

void send_error(httplib::Response& res, ApiError e, std::string param = {}) {
  if (!param.empty()) e.param = std::move(param);
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
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
  s.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, true); });
  // Not served (README, "Serving over HTTP"): the models are causal LMs and
  // the executor keeps the final hidden state on the device.
  s.Post("/v1/embeddings", [](const httplib::Request&, httplib::Response& res) {
    send_error(res, error_of(501,
                             "/v1/embeddings is not served: layerstream runs causal language models and does "
                             "not expose their final hidden state; use an embedding model's server",
                             "invalid_request_error", "not_implemented"));
  });
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
  if (auto e = check_sampling(p.sampling, model_->n_vocab())) return send_error(res, *e);
  if (auto e = force_tool_calls(p)) return send_error(res, *e);
  if (auto e = check_structured(p.structured, p.structured_field)) return send_error(res, *e);
  if (p.n > scheduler.parallel())
    return send_error(res, error_of(400, "'n' is " + std::to_string(p.n) + "; this server decodes at most " +
                                             std::to_string(scheduler.parallel()) + " sequences together (--parallel)",
                                    "invalid_request_error"),
                      "n");
  std::vector<int32_t> tokens;
  if (auto e = prompt_tokens(p, chat, tokens)) return send_error(res, *e);
  GenerationRequest g;
  if (auto e = generation_request(p, std::move(tokens), g)) return send_error(res, *e);
  const ResponseIds ids{(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++), p.model, unix_seconds()};
  if (g.max_tokens == 0 && !g.prompt_logprobs) {  // nothing to generate: answer at once
    RequestState::Chunk none;
    none.done = true;
    none.reason = FinishReason::kLength;
    none.prompt_tokens = static_cast<int>(g.prompt.size());
    std::vector<Choice> choices(p.n, Choice{p.echo ? p.prompt : "", FinishReason::kLength, nullptr});
    res.set_content(to_text(completion_response(ids, chat, choices, none)), "application/json");
    return;
  }
  const int32_t first_token = g.prompt.front();
  auto states = scheduler.submit_n(std::move(g), p.n);
  if (!states.ok()) return send_error(res, error_of(states.status()));
  // Completions' text_offset counts from the start of the prompt.
  const size_t prompt_bytes = chat || p.echo ? 0 : p.prompt.size();
  const ChoiceFormat format{chat,         p.echo ? p.prompt : "", p.logprobs >= 0, first_token,
                            prompt_bytes, tool_call_rules(p, chat)};
  if (p.stream) return stream_response(res, *states, ids, format, p.include_usage);

  std::vector<Choice> choices;
  RequestState::Chunk usage;
  for (auto& st : *states) {
    const RequestState::Chunk all = st->wait_all();
    if (all.failure == Failure::kError) return send_error(res, error_of(500, all.error, "server_error"));
    if (all.failure == Failure::kCancelled)
      return send_error(res,
                        error_of(503, all.error.empty() ? "cancelled" : all.error, "server_shutting_down"));
    size_t offset = format.prompt_bytes;
    choices.push_back({format.echo + all.text, all.reason, choice_logprobs(format, all, true, offset)});
    usage.prompt_tokens = all.prompt_tokens;
    usage.cached_tokens = all.cached_tokens;
    usage.completion_tokens += all.completion_tokens;
  }
  json body = completion_response(ids, chat, choices, usage);
  if (format.tools.format != ToolCallFormat::kNone)
    for (size_t i = 0; i < choices.size(); ++i) {
      ChatOutput out = parse_tool_calls(format.tools.format, choices[i].text);
      apply_rules(format.tools, out);
      set_chat_output(body, i, out);
    }
  res.set_content(to_text(body), "application/json");
}

ToolCallRules HttpServer::tool_call_rules(const CompletionParams& p, bool chat) const {
  if (!chat || p.conversation.tool_choice == ToolChoice::kNone) return {};
  return {template_.tool_call_format(), p.conversation.parallel_tool_calls};
}

// What the request asks of the scheduler. max_tokens past the room the
// prompt leaves in the context is a 400 naming it; without max_tokens the
// default is capped at that room (finish_reason "length" when it fills).
std::optional<ApiError> HttpServer::generation_request(const CompletionParams& p, std::vector<int32_t> tokens,
                                                       GenerationRequest& g) const {
  const int n_ctx = scheduler()->n_context();
  const int room = n_ctx - static_cast<int>(tokens.size());
  if (p.max_tokens > room && room > 0) {
    ApiError e = error_of(400,
                          "'max_tokens' is " + std::to_string(p.max_tokens) + " but the prompt's " +
                              std::to_string(tokens.size()) + " tokens leave room for " + std::to_string(room) +
                              " of the context's " + std::to_string(n_ctx) +
                              " (lower max_tokens, or start the server with a larger --ctx)",
                          "invalid_request_error", "context_length_exceeded");
    e.param = "max_tokens";
    return e;
  }
  g.prompt = std::move(tokens);
  g.max_tokens = p.max_tokens >= 0 ? p.max_tokens : std::min(options_.default_max_tokens, std::max(room, 0));
  g.sampling = p.sampling;
  g.stop = p.stop;
  g.logprobs = p.logprobs;
  g.prompt_logprobs = p.echo && p.logprobs >= 0;
  g.structured = p.structured;
  return std::nullopt;
}

// tool_choice "required" or a named function: the reply is constrained to
// calls in the template's format (a 400 naming tool_choice when the template
// has none we parse, or when response_format constrains the reply too).
std::optional<ApiError> HttpServer::force_tool_calls(CompletionParams& p) const {
  const ChatRequest& c = p.conversation;
  if (c.tool_choice != ToolChoice::kRequired && c.tool_choice != ToolChoice::kNamed) return std::nullopt;
  auto refuse = [](std::string message) {
    ApiError e = error_of(400, "'tool_choice': " + message, "invalid_request_error");
    e.param = "tool_choice";
    return e;
  };
  if (p.structured.kind != StructuredOutput::Kind::kNone)
    return refuse("a forced tool call and '" + p.structured_field +
                  "' both constrain the reply; send one of them");
  auto forced = forced_tool_calls(template_.tool_call_format(), c.tools_json,
                                  {.function = c.tool_name, .parallel = c.parallel_tool_calls});
  if (!forced.ok()) return refuse(forced.status().message());
  p.structured = std::move(*forced);
  p.structured_field = "tool_choice";
  return std::nullopt;
}

// Compiles response_format's constraint once here (the model caches it for
// the scheduler's choices), so a schema that does not compile, or a build
// without structured output, is a 400 naming the field.
std::optional<ApiError> HttpServer::check_structured(const StructuredOutput& structured,
                                                     const std::string& param) const {
  if (structured.kind == StructuredOutput::Kind::kNone) return std::nullopt;
  auto constraint = model_->constrain(structured);
  if (constraint.ok()) return std::nullopt;
  ApiError e = error_of(400, "'" + param + "': " + constraint.status().message(), "invalid_request_error");
  e.param = param;
  return e;
}

// A choice's logprobs object for what `c` carries (null when not asked);
// `first`: the choice's first chunk, which carries the echoed prompt's.
nlohmann::json HttpServer::choice_logprobs(const ChoiceFormat& f, const RequestState::Chunk& c, bool first,
                                           size_t& text_offset) const {
  if (!f.logprobs) return nullptr;
  const TokenText text_of = [this](int32_t id) { return model_->detokenize({id}); };
  const EchoedPrompt echo{f.first_token, &c.prompt_logprobs};
  const bool with_prompt = first && !c.prompt_logprobs.empty();
  json out = logprobs_json(f.chat, c.logprobs, text_of, with_prompt ? &echo : nullptr, text_offset);
  if (!f.chat)
    for (const json& token : out["tokens"]) text_offset += token.get<std::string>().size();
  return out;
}

// Server-sent events: a chunk per piece of text of each choice, its finish
// reason, usage when asked, [DONE]; a client that goes away cancels every
// choice of its request.
void HttpServer::stream_response(httplib::Response& res, std::vector<std::shared_ptr<RequestState>> states,
                                 const ResponseIds& ids, const ChoiceFormat& format, bool include_usage) {
  struct Progress {
    std::vector<std::shared_ptr<RequestState>> states;
    std::vector<bool> first, done;
    std::vector<size_t> offsets;  // per choice: text_offset of its next token
    std::vector<ToolCallStream> calls;  // per choice: text held as a possible tool call
    RequestState::Chunk usage;
    size_t finished = 0;
  };
  auto pr = std::make_shared<Progress>();
  pr->states = std::move(states);
  pr->first.assign(pr->states.size(), true);
  pr->done.assign(pr->states.size(), false);
  pr->offsets.assign(pr->states.size(), format.prompt_bytes);
  pr->calls.assign(pr->states.size(), ToolCallStream(format.tools.format));
  const auto cancel_all = [pr] {
    for (auto& st : pr->states) st->cancel();
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, pr, ids, format, include_usage, cancel_all](size_t, httplib::DataSink& sink) {
        std::string out;
        bool any = false;
        for (size_t i = 0; i < pr->states.size(); ++i) {
          RequestState::Chunk c;
          const auto wait = std::chrono::milliseconds(any ? 0 : 500 / static_cast<int>(pr->states.size()));
          if (pr->done[i] || !pr->states[i]->next(c, wait)) continue;
          any = true;
          out += stream_events(format, ids, static_cast<int>(i), c, pr->first[i], pr->offsets[i], pr->calls[i]);
          pr->first[i] = false;
          if (!c.done) continue;
          pr->done[i] = true;
          ++pr->finished;
          pr->usage.prompt_tokens = c.prompt_tokens;
          pr->usage.cached_tokens = c.cached_tokens;
          pr->usage.completion_tokens += c.completion_tokens;
        }
        const bool all_done = pr->finished == pr->states.size();
        if (all_done) {
          if (include_usage) {
            json u = stream_chunk(ids, format.chat, 0, "", false, FinishReason::kNone);
            u["choices"] = json::array();
            u["usage"] = usage_json(pr->usage);
            out += sse(u);
          }
          out += "data: [DONE]\n\n";
        }
        // Nothing yet: a comment line keeps the stream alive and finds a
        // client that went away (the write fails).
        if (!any) out = ":\n\n";
        // Nothing to send (text held as a possible tool call): an empty
        // write would be the chunked encoding's end of body.
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          cancel_all();
          return false;
        }
        if (all_done) sink.done();
        return true;
      },
      [cancel_all](bool success) {
        if (!success) cancel_all();  // the client went away: free its sequences
      });
}

// The events of one chunk of choice `index`: its text and logprobs, then
// its finish reason or error when it ended.
std::string HttpServer::stream_events(const ChoiceFormat& f, const ResponseIds& ids, int index,
                                      const RequestState::Chunk& c, bool first, size_t& text_offset,
                                      ToolCallStream& calls) const {
  std::string out;
  const std::string text = (first ? f.echo : "") + calls.feed(c.text);
  if (!text.empty() || first || !c.logprobs.empty())
    out += sse(stream_chunk(ids, f.chat, index, text, first, FinishReason::kNone, choice_logprobs(f, c, first, text_offset)));
  if (!c.done) return out;
  const HeldReply held = finish_streamed_reply(calls, f.tools, ids, index);
  for (const json& chunk : held.chunks) out += sse(chunk);
  if (c.failure != Failure::kNone)
    return out + sse(error_of(c.failure == Failure::kError ? 500 : 503, c.error,
                              c.failure == Failure::kError ? "server_error" : "server_shutting_down")
                         .body());
  json end = stream_chunk(ids, f.chat, index, "", false, c.reason);
  if (held.has_calls) finish_with_tool_calls(end);
  return out + sse(end);
}

namespace {

// The body as a JSON object whose keys are all in `known`; a 400 otherwise.
std::optional<ApiError> parse_object(const std::string& body, std::initializer_list<const char*> known, json& j) {
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    return error_of(400, std::string("the body is not valid JSON: ") + e.what(), "invalid_request_error");
  }
  if (!j.is_object()) return error_of(400, "the body must be a JSON object", "invalid_request_error");
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
      ApiError e = error_of(400, "unknown field '" + key + "'", "invalid_request_error");
      e.param = key;
      return e;
    }
  }
  return std::nullopt;
}

ApiError field_error(const std::string& field, const std::string& message) {
  ApiError e = error_of(400, message, "invalid_request_error");
  e.param = field;
  return e;
}

}  // namespace

// {"prompt": text, "add_special_tokens": true} or {"messages": [...]} (the
// chat template with the generation prompt) -> {"tokens", "count", "max_model_len"}.
void HttpServer::tokenize(const httplib::Request& req, httplib::Response& res) {
  BatchScheduler* sched = scheduler();
  if (!sched) return send_error(res, error_of(503, "the model is still loading", "server_loading", "server_loading"));
  json j;
  if (auto e = parse_object(req.body, {"model", "prompt", "messages", "add_special_tokens"}, j))
    return send_error(res, *e);
  bool add_special = true;
  if (j.contains("add_special_tokens") && !j["add_special_tokens"].is_null()) {
    if (!j["add_special_tokens"].is_boolean())
      return send_error(res, field_error("add_special_tokens", "'add_special_tokens' must be a boolean"));
    add_special = j["add_special_tokens"].get<bool>();
  }
  std::vector<int32_t> tokens;
  if (j.contains("messages")) {
    CompletionParams p;
    json chat = {{"messages", j["messages"]}};
    if (auto e = parse_completion_request(chat.dump(), true, options_.model_id, p)) return send_error(res, *e);
    if (auto e = prompt_tokens(p, true, tokens)) return send_error(res, *e);
  } else {
    if (!j.contains("prompt") || !j["prompt"].is_string())
      return send_error(res, field_error("prompt", "'prompt' (a string) or 'messages' is required"));
    tokens = model_->tokenize(j["prompt"].get<std::string>(), add_special);
  }
  res.set_content(to_text({{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", sched->n_context()}}),
                  "application/json");
}

// {"tokens": [ids]} -> {"prompt": text}.
void HttpServer::detokenize(const httplib::Request& req, httplib::Response& res) {
  if (!scheduler()) return send_error(res, error_of(503, "the model is still loading", "server_loading", "server_loading"));
  json j;
  if (auto e = parse_object(req.body, {"model", "tokens"}, j)) return send_error(res, *e);
  if (!j.contains("tokens") || !j["tokens"].is_array())
    return send_error(res, field_error("tokens", "'tokens' must be an array of token ids"));
  std::vector<int32_t> tokens;
  for (const json& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model_->n_vocab())
      return send_error(res, field_error("tokens", "'tokens' holds " + t.dump() + ", not a token id in [0, " +
                                                       std::to_string(model_->n_vocab()) + ")"));
    tokens.push_back(t.get<int32_t>());
  }
  res.set_content(to_text({{"prompt", model_->detokenize(tokens)}}), "application/json");
}

}  // namespace layerstream::serve

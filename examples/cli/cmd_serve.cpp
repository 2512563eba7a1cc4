// `layerstream serve MODEL`: an OpenAI-compatible HTTP server whose requests
// share every streamed pass (continuous batching over --parallel sequences).
// Prints "listening on http://HOST:PORT" on stdout once it accepts requests;
// SIGTERM or SIGINT stops accepting, lets running requests finish (up to
// --grace seconds, then cancels them) and exits 0.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "examples/cli/cli_common.h"
#include "layerstream/layerstream.h"
#include "runtime/core/log.h"
#include "runtime/serve/http_server.h"

namespace layerstream::cli {
namespace {

class ServeCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    sub.add_option("model", model_, "GGUF model file")->required();
    model_flags_.add_to(sub);
    sub.add_option("--host", so_.host, "Address to listen on")->capture_default_str();
    sub.add_option("--port", so_.port, "Port (0: any free port)")->capture_default_str();
    sub.add_option("--parallel", sched_.parallel, "Sequences decoded together in every pass")
        ->capture_default_str();
    sub.add_option("--queue", sched_.queue, "Requests that may wait for a sequence (beyond: 503)")
        ->capture_default_str();
    sub.add_flag("--no-prefix-cache", no_prefix_cache_,
                 "Prefill every prompt whole (no reuse of earlier requests' KV)");
    sub.add_option("--cache-sequences", sched_.cache_sequences,
                   "KV sequences beyond --parallel that only hold cached prompt prefixes")
        ->capture_default_str();
    sub.add_option("--api-key", so_.api_key, "Require 'Authorization: Bearer KEY' on /v1/* and /metrics");
    sub.add_option("--max-body", so_.max_body_bytes, "Largest request body in bytes (beyond: 413)")
        ->capture_default_str();
    sub.add_option("--default-max-tokens", so_.default_max_tokens, "max_tokens when a request gives none")
        ->capture_default_str();
    sub.add_option("--grace", grace_s_, "Seconds running requests may finish after SIGTERM")
        ->capture_default_str();
    sub.add_option("--cors-origin", so_.cors_origin,
                   "Allow browser pages of this origin (e.g. http://localhost:3000, or *) to call the API");
    add_chat_template_option(sub, chat_template_);
  }

  int run() override {
    if (Status s = model_flags_.resolve(); !s.ok()) return usage_error(s.message());
    if (sched_.parallel < 1) return usage_error("--parallel must be >= 1");
    if (sched_.queue < 0) return usage_error("--queue must be >= 0");
    if (so_.port < 0 || so_.port > 65535) return usage_error("--port must be in [0, 65535]");
    if (sched_.cache_sequences < 0) return usage_error("--cache-sequences must be >= 0");
    sched_.prefix_cache = !no_prefix_cache_;
    mo_.sequences = sched_.context_sequences();
    so_.model_id = std::filesystem::path(model_).stem().string();

    // Signals go to one thread that shuts the server down in order.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR2);  // our own wake-up of the signal thread at exit
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    std::atomic<bool> stop{false};
    std::mutex mu;
    serve::HttpServer* live = nullptr;
    std::thread signals([&] {
      int sig = 0;
      sigwait(&set, &sig);
      if (sig == SIGUSR2) return;
      LS_LOG_INFO("serve: {} received: finishing running requests, then exiting",
                  sig == SIGTERM ? "SIGTERM" : "SIGINT");
      stop = true;
      std::lock_guard lock(mu);
      if (live) live->shutdown(std::chrono::milliseconds(static_cast<int64_t>(grace_s_ * 1000)));
    });
    struct JoinSignals {
      std::thread& t;
      ~JoinSignals() {
        pthread_kill(t.native_handle(), SIGUSR2);
        t.join();
      }
    } join_signals{signals};

    auto tmpl = ChatTemplate::for_file(model_, chat_template_);
    if (!tmpl.ok()) return fail(tmpl.status());
    return serve_until_stopped(std::move(*tmpl), stop, mu, live);
  }

 private:
  // Listens, loads the model, serves until a signal's shutdown; `live` is
  // the server the signal thread shuts down (guarded by `mu`).
  int serve_until_stopped(ChatTemplate tmpl, std::atomic<bool>& stop, std::mutex& mu,
                          serve::HttpServer*& live) {
    // Declared before the server: destroyed after its threads have stopped.
    std::shared_ptr<Model> model;
    std::unique_ptr<serve::BatchScheduler> scheduler;
    // The listener comes up before the model loads, so routers see /health
    // answer 503 ("loading") rather than a refused connection.
    serve::HttpServer server(std::move(tmpl), so_, sched_);
    if (Status st = server.bind(); !st.ok()) return fail(st);
    Status http_status;
    std::thread http([&] { http_status = server.run(); });
    struct JoinHttp {
      serve::HttpServer& server;
      std::thread& t;
      std::mutex& mu;
      serve::HttpServer*& live;
      ~JoinHttp() {
        {
          std::lock_guard lock(mu);  // the signal thread no longer reaches the server
          live = nullptr;
        }
        server.shutdown(std::chrono::milliseconds(0));  // a no-op after a signal's drain
        if (t.joinable()) t.join();
      }
    } join_http{server, http, mu, live};
    {
      std::lock_guard lock(mu);
      if (stop) return 0;
      live = &server;
    }
    LS_LOG_INFO("serve: http://{}:{}/health answers 503 while {} loads", so_.host, server.port(), model_);

    // A signal while the model loads cancels the load; once it is open, later
    // loads (re-plans between passes) must run to the end of what runs.
    std::atomic<bool> opened{false};
    mo_.progress = [&](float) { return opened.load() || !stop.load(); };
    auto opened_model = Model::open(model_, mo_);
    opened = true;
    if (stop) return 0;
    if (!opened_model.ok()) return fail(opened_model.status());
    model = *opened_model;
    auto created = serve::BatchScheduler::create(model, sched_);
    if (!created.ok()) return fail(created.status());
    scheduler = std::move(*created);
    if (!server.serve_model(model, *scheduler)) return 0;  // a signal came first
    std::cout << "listening on http://" << so_.host << ":" << server.port() << " (model " << so_.model_id
              << ", " << sched_.parallel << " sequences of " << scheduler->n_context() << " positions"
              << (sched_.prefix_cache ? ", prefix cache on " + std::to_string(sched_.context_sequences()) +
                                            " sequences"
                                      : std::string(", no prefix cache"))
              << "; " << model->placement() << ")" << std::endl;
    http.join();
    if (!http_status.ok()) return fail(http_status);
    LS_LOG_INFO("serve: stopped");
    return 0;
  }

  std::string model_;
  std::string chat_template_;  // --chat-template: a built-in name or a Jinja file
  double grace_s_ = 30;
  bool no_prefix_cache_ = false;
  ModelFlags model_flags_;
  ModelOptions& mo_ = model_flags_.options;
  serve::ServerOptions so_;
  serve::SchedulerOptions sched_;
};

}  // namespace

LS_REGISTER_COMMAND(ServeCommand, "serve",
                    "Serve a model over an OpenAI-compatible HTTP API with continuous batching");

}  // namespace layerstream::cli

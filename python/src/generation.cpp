// Generation: the worker thread, the queue and the interruptible wait
// (generation.h); the Python classes TokenEvent, Stats, GenerateResult and
// Generation.
#include "generation.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

namespace layerstream::python {

Generation::Generation(nb::object owner, PyContext& context, Prompt prompt, const GenerateOptions& options)
    : owner_(std::move(owner)),
      context_(&context),
      shared_(std::make_shared<Shared>()),
      starter_(std::this_thread::get_id()) {
  Context& ctx = context.idle("generate");
  context.busy = true;
  context.active = this;
  worker_ = std::thread([shared = shared_, &ctx, prompt = std::move(prompt), options] {
    auto on_token = [&shared](const TokenEvent& e) {
      std::unique_lock<std::mutex> lock(shared->mu);
      shared->events.push_back(e);
      shared->cv.notify_one();
      shared->room.wait(lock, [&] { return shared->events.size() <= kLookahead || shared->stop.load(); });
      return !shared->stop.load();
    };
    Result<GenerateResult> r = std::holds_alternative<std::string>(prompt)
                                   ? ctx.generate(std::get<std::string>(prompt), options, on_token)
                                   : ctx.generate(std::get<std::vector<int32_t>>(prompt), options, on_token);
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->outcome.emplace(std::move(r));
      shared->done = true;
    }
    shared->cv.notify_one();
  });
}

Generation::~Generation() {
  if (!finished_) (void)finish_after_stop();
}

Status Generation::finish_after_stop() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stop.store(true);
  }
  shared_->room.notify_all();
  return finish();
}

Status Generation::finish() {
  if (finished_) return Status::OK();
  {
    nb::gil_scoped_release release;
    if (worker_.joinable()) worker_.join();
  }
  finished_ = true;
  context_->busy = false;
  context_->active = nullptr;
  Result<GenerateResult>& r = *shared_->outcome;
  if (!r.ok()) return r.status();
  result_.emplace(std::move(r).value());
  return Status::OK();
}

void Generation::close() { check(finish_after_stop()); }

TokenEvent Generation::next() {
  std::optional<TokenEvent> e = next_event();
  if (!e) throw nb::stop_iteration();
  return std::move(*e);
}

std::optional<TokenEvent> Generation::next_event() {
  using namespace std::chrono_literals;
  if (finished_) return std::nullopt;  // closed or interrupted: tokens still queued are dropped
  for (;;) {
    std::optional<TokenEvent> event;
    bool done = false;
    {
      nb::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(shared_->mu);
      shared_->cv.wait_for(lock, 20ms, [&] { return !shared_->events.empty() || shared_->done; });
      if (!shared_->events.empty()) {
        event = std::move(shared_->events.front());
        shared_->events.pop_front();
        shared_->room.notify_one();
      } else {
        done = shared_->done;
      }
    }
    if (event) return event;
    if (done) {
      check(finish());
      return std::nullopt;
    }
    if (PyErr_CheckSignals() != 0) {  // Ctrl-C (main thread only): stop, then re-raise
      nb::python_error interrupt;
      (void)finish_after_stop();
      throw interrupt;
    }
  }
}

namespace {

nb::dict stats_dict(const Stats& s) {
  nb::dict d;
  d["backend"] = s.backend;
  d["device"] = s.device;
  d["plan"] = s.plan;
  d["prompt_tokens"] = s.prompt_tokens;
  d["cached_tokens"] = s.cached_tokens;
  d["generated_tokens"] = s.generated_tokens;
  d["batch"] = s.batch;
  d["prefill_s"] = s.prefill_s;
  d["decode_s"] = s.decode_s;
  d["prefill_tokens_per_s"] = s.prefill_tokens_per_s;
  d["decode_tokens_per_s"] = s.decode_tokens_per_s;
  d["mean_decode_pass_ms"] = s.mean_decode_pass_ms;
  d["mean_predicted_pass_ms"] = s.mean_predicted_pass_ms;
  d["mean_lower_bound_ms"] = s.mean_lower_bound_ms;
  d["overlap_efficiency"] = s.overlap_efficiency;
  d["bytes_streamed_per_pass"] = s.bytes_streamed_per_pass;
  d["bytes_streamed_per_token"] = s.bytes_streamed_per_token;
  d["layers_resident"] = s.layers_resident;
  d["layers_ram"] = s.layers_ram;
  d["layers_disk"] = s.layers_disk;
  d["model_bytes"] = s.model_bytes;
  d["vram_budget"] = s.vram_budget;
  d["ram_budget"] = s.ram_budget;
  d["kv_bytes"] = s.kv_bytes;
  d["load_bytes"] = s.load_bytes;
  d["replans"] = s.replans;
  d["disk_gbps"] = s.disk_gbps;
  return d;
}

}  // namespace

void bind_generation(nb::module_& m) {
  nb::class_<TokenEvent>(m, "TokenEvent",
                         R"(One generated token: its sequence, id and the text it completes.

The text is empty while a multibyte character is incomplete.)")
      .def_ro("sequence", &TokenEvent::sequence)
      .def_ro("token", &TokenEvent::token)
      .def_ro("logprob", &TokenEvent::logprob,
              "The token's TokenLogprob when generate() was asked for logprobs, else None.")
      .def_prop_ro(
          "piece", [](const TokenEvent& e) { return utf8_text(e.piece); },
          "The text this token completes (invalid UTF-8 reads as U+FFFD).")
      .def("__repr__", [](const TokenEvent& e) {
        return "TokenEvent(sequence=" + std::to_string(e.sequence) + ", token=" + std::to_string(e.token) +
               ", piece=" + nb::cast<std::string>(nb::repr(utf8_text(e.piece))) + ")";
      });

  nb::class_<Stats>(m, "Stats", "What one generation did, measured (layerstream::Stats).")
      .def_ro("backend", &Stats::backend)
      .def_ro("device", &Stats::device)
      .def_ro("plan", &Stats::plan)
      .def_ro("prompt_tokens", &Stats::prompt_tokens)
      .def_ro("cached_tokens", &Stats::cached_tokens,
              "Prompt tokens of sequence 0 whose KV was kept (REUSE_PREFIX).")
      .def_ro("generated_tokens", &Stats::generated_tokens)
      .def_ro("batch", &Stats::batch)
      .def_ro("prefill_s", &Stats::prefill_s)
      .def_ro("decode_s", &Stats::decode_s)
      .def_ro("prefill_tokens_per_s", &Stats::prefill_tokens_per_s)
      .def_ro("decode_tokens_per_s", &Stats::decode_tokens_per_s)
      .def_ro("mean_decode_pass_ms", &Stats::mean_decode_pass_ms)
      .def_ro("mean_predicted_pass_ms", &Stats::mean_predicted_pass_ms)
      .def_ro("mean_lower_bound_ms", &Stats::mean_lower_bound_ms)
      .def_ro("overlap_efficiency", &Stats::overlap_efficiency)
      .def_ro("bytes_streamed_per_pass", &Stats::bytes_streamed_per_pass)
      .def_ro("bytes_streamed_per_token", &Stats::bytes_streamed_per_token)
      .def_ro("layers_resident", &Stats::layers_resident)
      .def_ro("layers_ram", &Stats::layers_ram)
      .def_ro("layers_disk", &Stats::layers_disk)
      .def_ro("model_bytes", &Stats::model_bytes)
      .def_ro("vram_budget", &Stats::vram_budget)
      .def_ro("ram_budget", &Stats::ram_budget)
      .def_ro("kv_bytes", &Stats::kv_bytes)
      .def_ro("load_bytes", &Stats::load_bytes)
      .def_ro("replans", &Stats::replans)
      .def_ro("disk_gbps", &Stats::disk_gbps)
      .def("as_dict", &stats_dict, "Every field as a dict (JSON-ready).")
      .def("__str__", &format_stats);

  nb::class_<TokenLogprob>(m, "TokenLogprob",
                           R"(A token's log-probability under the softmax of the raw logits.

No temperature, penalty or filter applies (what OpenAI reports), with
the most likely alternatives.)")
      .def_ro("token", &TokenLogprob::token)
      .def_ro("logprob", &TokenLogprob::logprob)
      .def_ro("top", &TokenLogprob::top, "(token, logprob) pairs, most likely first.")
      .def("__repr__", [](const TokenLogprob& t) {
        return "TokenLogprob(token=" + std::to_string(t.token) + ", logprob=" + std::to_string(t.logprob) +
               ", top=" + std::to_string(t.top.size()) + " alternatives)";
      });

  nb::class_<GenerateResult>(m, "GenerateResult", "The whole of one generation.")
      .def_ro("prompt_tokens", &GenerateResult::prompt_tokens, "The tokens this call prefilled (sequence 0).")
      .def_ro("generated", &GenerateResult::generated, "Generated token ids, per sequence.")
      .def_prop_ro(
          "text",
          [](const GenerateResult& r) {
            nb::list texts;
            for (const std::string& t : r.text) texts.append(utf8_text(t));
            return texts;
          },
          "Generated text, per sequence (invalid UTF-8 reads as U+FFFD).")
      .def_ro("vocab", &GenerateResult::vocab)
      .def_prop_ro(
          "finish",
          [](const GenerateResult& r) {
            std::vector<std::string> names;
            for (FinishReason f : r.finish) names.emplace_back(finish_reason_name(f));
            return names;
          },
          "Why each sequence stopped: none, eog, stop, length, context_full or callback.")
      .def_ro("seeds", &GenerateResult::seeds, "The sampling seed of each sequence (the drawn one when random).")
      .def_ro("logprobs", &GenerateResult::logprobs,
              "Per sequence, a TokenLogprob per generated token (generate's logprobs >= 0).")
      .def_ro("prompt_logprobs", &GenerateResult::prompt_logprobs,
              "TokenLogprob of prompt_tokens[1:] (generate's prompt_logprobs=True).")
      .def_ro("stats", &GenerateResult::stats)
      .def_prop_ro(
          "logits",
          [](const GenerateResult& r) {
            const size_t rows = r.vocab ? r.logits.size() / r.vocab : 0;
            auto* copy = new std::vector<float>(r.logits);
            nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
            return nb::ndarray<nb::numpy, float, nb::ndim<2>>(copy->data(), {rows, static_cast<size_t>(r.vocab)},
                                                              owner);
          },
          nb::rv_policy::move,
          R"(float32 array [generated positions, vocab] of sequence 0.

Empty unless keep_logits=True; row i is the distribution token i was
sampled from.)");

  nb::class_<Generation>(m, "Generation",
                         R"(An iterator of TokenEvent from Context.generate.

The generation runs while you iterate (with the GIL released) and at most
a few tokens ahead of the loop; Ctrl-C raises KeyboardInterrupt and stops
it cleanly. After the last token, `result` holds the GenerateResult. A
loop left early is stopped by close(), a with block, or the next call on
the context from the same thread.)")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &Generation::next)
      .def("close", &Generation::close, "Stops at the next token and waits; the context stays usable.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__", [](Generation& g, nb::handle, nb::handle, nb::handle) { g.close(); },
          nb::arg("exc_type").none(), nb::arg("exc_value").none(), nb::arg("traceback").none())
      .def_prop_ro("finished", &Generation::finished, "True once it ended or was closed.")
      .def_prop_ro("result", &Generation::result, nb::rv_policy::reference_internal,
                   "The GenerateResult once the iterator is exhausted or closed (None before).");
}

}  // namespace layerstream::python

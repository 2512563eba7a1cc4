// Context: generate (an iterator, generation.h), complete (run to the end),
// decode a Batch and read logits as NumPy arrays, KV cache edits.
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "generation.h"

namespace layerstream::python {

Context& PyContext::idle(const char* what) {
  if (!context) throw nb::value_error((std::string(what) + ": the context is closed").c_str());
  if (busy && active && active->started_here()) active->abandon();  // a loop this thread left early
  if (busy)
    throw std::runtime_error(std::string(what) +
                             ": the context is busy with a generation another thread iterates (a context "
                             "serves one thread at a time; use one context per thread)");
  return *context;
}

namespace {

// The sampling fields of generate/complete, checked by the library's
// validate_sampling (ValueError with its message).
SamplingOptions sampling_options(int n_vocab, float temperature, int top_k, float top_p, float min_p,
                                 float repeat_penalty, int repeat_last_n, nb::handle seed, float typical_p,
                                 float presence_penalty, float frequency_penalty,
                                 std::map<int32_t, float> logit_bias) {
  SamplingOptions o{temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed_arg(seed), typical_p,
                    presence_penalty, frequency_penalty, std::move(logit_bias)};
  check(validate_sampling(o, n_vocab));
  return o;
}

Generation* start(nb::handle self, Prompt prompt, int max_tokens, float temperature, int top_k, float top_p,
                  float min_p, float repeat_penalty, int repeat_last_n, nb::object seed, bool stop_at_eog,
                  bool keep_logits, float typical_p, float presence_penalty, float frequency_penalty,
                  std::map<int32_t, float> logit_bias, std::vector<std::string> stop, int logprobs,
                  bool prompt_logprobs, PromptStart prompt_start) {
  PyContext& pc = nb::cast<PyContext&>(self);
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling = sampling_options(pc.model ? pc.model->n_vocab() : 0, temperature, top_k, top_p, min_p,
                                repeat_penalty, repeat_last_n, seed, typical_p, presence_penalty,
                                frequency_penalty, std::move(logit_bias));
  o.stop_at_eog = stop_at_eog;
  o.keep_logits = keep_logits;
  o.stop = std::move(stop);
  o.logprobs = logprobs;
  o.prompt_logprobs = prompt_logprobs;
  o.prompt_start = prompt_start;
  return new Generation(nb::borrow(self), pc, std::move(prompt), o);
}

// IndexError "<what> <i> is outside [0, n)<where>" for an index the C++ API
// would abort on (docs/RELIABILITY.md, "Mistakes in calls").
void require_index(const char* what, int i, int n, const char* where = "") {
  if (i < 0 || i >= n)
    throw nb::index_error((std::string(what) + " " + std::to_string(i) + " is outside [0, " + std::to_string(n) + ")" +
                           where).c_str());
}

// complete(): generate() run to the end, taking start()'s arguments and
// returning the finished generation's GenerateResult.
template <typename Start>
struct RunToEnd;
template <typename... Args>
struct RunToEnd<Generation* (*)(Args...)> {
  static GenerateResult run(Args... args) {
    std::unique_ptr<Generation> g(start(std::move(args)...));
    while (g->next_event()) {
    }
    return GenerateResult(*g->result());
  }
};

// The generate/complete keyword arguments, GenerateOptions' defaults.
#define LS_GENERATE_ARGS                                                                                   \
  nb::arg("prompt"), nb::kw_only(), nb::arg("max_tokens") = 32, nb::arg("temperature") = 0.8,             \
      nb::arg("top_k") = 40, nb::arg("top_p") = 0.95, nb::arg("min_p") = 0.05,                              \
      nb::arg("repeat_penalty") = 1.0, nb::arg("repeat_last_n") = 64, nb::arg("seed").none() = nb::none(),   \
      nb::arg("stop_at_eog") = true, nb::arg("keep_logits") = false, nb::arg("typical_p") = 1.0,             \
      nb::arg("presence_penalty") = 0.0, nb::arg("frequency_penalty") = 0.0,                                  \
      nb::arg("logit_bias") = std::map<int32_t, float>(), nb::arg("stop") = std::vector<std::string>(),      \
      nb::arg("logprobs") = -1, nb::arg("prompt_logprobs") = false,                                          \
      nb::arg("prompt_start") = PromptStart::kContinue

// The generate/complete arguments, for their docstrings.
#define LS_GENERATE_ARGS_DOC                                                     \
  "Args:\n"                                                                     \
  "    prompt: text, or token ids, appended to every sequence. The first\n"     \
  "        call on a context adds BOS to a text prompt.\n"                      \
  "    max_tokens: most tokens generated per sequence.\n"                       \
  "    temperature: <= 0 is greedy (argmax).\n"                                 \
  "    top_k: keep the k most likely tokens (<= 0: all).\n"                     \
  "    top_p: keep the most likely tokens up to this mass (>= 1: all).\n"       \
  "    min_p: drop tokens below min_p x the top probability (<= 0: none).\n"    \
  "    repeat_penalty: > 1 makes the last repeat_last_n tokens less likely.\n"  \
  "    repeat_last_n: tokens of history the repetition penalty looks at.\n"     \
  "    seed: sequence i samples with seed + i; None or -1: a random seed.\n"    \
  "    stop_at_eog: stop a sequence at an end-of-generation token.\n"           \
  "    keep_logits: keep sequence 0's logits in GenerateResult.logits.\n"      \
  "    typical_p: locally typical sampling mass (1: off).\n"                  \
  "    presence_penalty: subtracted from the logit of a token in the\n"       \
  "        window (OpenAI's; 0: off).\n"                                      \
  "    frequency_penalty: subtracted per occurrence in the window (0: off).\n" \
  "    logit_bias: {token id: value} added to the logits (-inf bans).\n"      \
  "    stop: strings that end a sequence (not returned nor streamed).\n"      \
  "    logprobs: >= 0: GenerateResult.logprobs with this many alternatives\n" \
  "        per token; -1: none.\n"                                            \
  "    prompt_logprobs: GenerateResult.prompt_logprobs of the prompt.\n"     \
  "    prompt_start: CONTINUE: the prompt follows what each sequence\n"     \
  "        holds. REUSE_PREFIX: the prompt is the whole sequence; the\n"    \
  "        longest prefix of it the sequence holds (earlier prompts and\n"  \
  "        answers) is kept and only the rest prefilled, as\n"             \
  "        llama-cpp-python's Llama does (Stats.cached_tokens). FRESH:\n"  \
  "        the whole prompt prefilled on cleared sequences.\n\n"          \
  "Raises:\n"                                                                 \
  "    ValueError: (InvalidArgumentError) a sampling value out of range."

nb::ndarray<nb::numpy, float, nb::ndim<1>> logits_array(std::span<const float> row) {
  auto* copy = new std::vector<float>(row.begin(), row.end());
  nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return nb::ndarray<nb::numpy, float, nb::ndim<1>>(copy->data(), {copy->size()}, owner);
}

}  // namespace

void bind_context(nb::module_& m) {
  nb::class_<PyContext>(m, "Context",
                        R"(One conversation on a Model.

KV-cache sequences that persist between calls, so a second generate()
continues where the last stopped and prefills only what is new. One thread
uses a context at a time; different contexts run on different threads at
once. A with block closes it.)")
      .def("generate", &start, LS_GENERATE_ARGS, nb::rv_policy::take_ownership,
           "Generates from `prompt` as an iterator of TokenEvent.\n\n"
           "The iterator's `result` holds the GenerateResult at the end.\n\n" LS_GENERATE_ARGS_DOC)
      .def("complete", &RunToEnd<decltype(&start)>::run, LS_GENERATE_ARGS,
           "generate() run to the end: the GenerateResult.\n\n" LS_GENERATE_ARGS_DOC)
      .def(
          "decode",
          [](PyContext& pc, const Batch& batch) {
            Context& ctx = pc.idle("decode");
            pc.busy = true;
            Status s;
            {
              nb::gil_scoped_release release;
              s = ctx.decode(batch);
            }
            pc.busy = false;
            check(s);
          },
          nb::arg("batch"),
          R"(Runs a Batch (GIL released).

Raises:
    ValueError: (InvalidArgumentError) naming the token for a bad id,
        sequence or position; nothing is decoded then.)")
      .def(
          "logits",
          [](PyContext& pc, int i) {
            Context& ctx = pc.idle("logits");
            require_index("logits: token", i, ctx.last_decode_tokens(), " of the last decode");
            return logits_array(ctx.logits(i));
          },
          nb::arg("i"),
          R"(float32 array of the logits of token i of the last decode().

Empty when that token did not ask for logits. IndexError when i is not a
token of the last decode().)")
      .def_prop_ro(
          "sequences", [](PyContext& pc) { return pc.idle("sequences").sequences(); }, "KV sequences it holds.")
      .def_prop_ro(
          "n_context", [](PyContext& pc) { return pc.idle("n_context").n_context(); }, "Positions per sequence.")
      .def(
          "n_ctx", [](PyContext& pc) { return pc.idle("n_ctx").n_context(); },
          "Positions per sequence (the context length).")
      .def(
          "position",
          [](PyContext& pc, int seq) {
            Context& ctx = pc.idle("position");
            require_index("position: sequence", seq, ctx.sequences());
            return ctx.position(seq);
          },
          nb::arg("sequence") = 0,
          "Tokens the sequence holds (its next position). IndexError for a sequence\n"
          "outside [0, sequences).")
      .def(
          "clear", [](PyContext& pc, int seq) { check(pc.idle("clear").clear(seq)); }, nb::arg("sequence") = -1,
          "Forgets every token of the sequence (-1: all).")
      .def(
          "copy_sequence", [](PyContext& pc, int src, int dst) { check(pc.idle("copy_sequence").copy_sequence(src, dst)); },
          nb::arg("src"), nb::arg("dst"), "dst becomes a copy of src (a shared prefix, decoded once).")
      .def(
          "remove", [](PyContext& pc, int seq, int from) { check(pc.idle("remove").remove(seq, from)); },
          nb::arg("sequence"), nb::arg("start"), "Forgets positions >= start of the sequence.")
      .def(
          "write_trace", [](PyContext& pc, const std::filesystem::path& path) { check(pc.idle("write_trace").write_trace(path.string())); },
          nb::arg("path"), "Chrome trace-event JSON of the model's passes (needs Model(trace=True)).")
      .def(
          "close", [](PyContext& pc) {
            (void)pc.idle("close");
            pc.context.reset();
            pc.model.reset();
          },
          "Returns the sequences to the model's pool now (also when the context is\n"
          "garbage-collected). A generation this thread left unfinished is stopped.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__",
          [](PyContext& pc, nb::handle, nb::handle, nb::handle) {
            if (pc.busy && pc.active && pc.active->started_here()) pc.active->abandon();
            if (pc.context && !pc.busy) {
              pc.context.reset();
              pc.model.reset();
            }
          },
          nb::arg("exc_type").none(), nb::arg("exc_value").none(), nb::arg("traceback").none());
}

}  // namespace layerstream::python

// The typed options as Python enums (Backend, IoPath, KvType, Strategy), the
// Batch of Context.decode and the SamplerChain.
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace layerstream::python {

void bind_options(nb::module_& m) {
  nb::enum_<Backend>(m, "Backend", "Where layers compute: AUTO picks CUDA when a device is present, else HOST.")
      .value("AUTO", Backend::kAuto)
      .value("HOST", Backend::kHost)
      .value("CUDA", Backend::kCuda);
  nb::enum_<IoPath>(m, "IoPath", "How disk-tier layers are read (AUTO: io_uring O_DIRECT when available).")
      .value("AUTO", IoPath::kAuto)
      .value("URING", IoPath::kUring)
      .value("PREAD", IoPath::kPread)
      .value("BUFFERED", IoPath::kBuffered);
  nb::enum_<KvType>(m, "KvType", "Element type of the KV cache.")
      .value("F32", KvType::kF32)
      .value("F16", KvType::kF16);
  nb::enum_<PromptStart>(m, "PromptStart",
                         "Where Context.generate puts its prompt.\n\n"
                         "CONTINUE: after what each sequence holds. REUSE_PREFIX: at\n"
                         "position 0, keeping the longest prefix each sequence holds and\n"
                         "prefilling the rest. FRESH: at position 0 on cleared sequences.")
      .value("CONTINUE", PromptStart::kContinue)
      .value("REUSE_PREFIX", PromptStart::kReusePrefix)
      .value("FRESH", PromptStart::kFresh);
  nb::enum_<Strategy>(m, "Strategy",
                      "How layers are placed: RESIDENT (all in the budget), SERIAL (load then compute), "
                      "OVERLAP (two window slots), PLANNED (the planner, re-planning on drift).")
      .value("RESIDENT", Strategy::kResident)
      .value("SERIAL", Strategy::kSerial)
      .value("OVERLAP", Strategy::kOverlap)
      .value("PLANNED", Strategy::kPlanned)
      .value("HOST", Strategy::kHost);

  nb::class_<Batch>(m, "Batch",
                    R"(Tokens for one Context.decode call.

Each names its sequence, its position in that sequence, and whether its
logits are wanted (like llama.cpp's llama_batch).)")
      .def(nb::init<>())
      .def("add", &Batch::add, nb::arg("token"), nb::arg("position"), nb::arg("sequence") = 0,
           nb::arg("logits") = false, "Appends one token.")
      .def("add_sequence", &Batch::add_sequence, nb::arg("tokens"), nb::arg("first_position"),
           nb::arg("sequence") = 0, nb::arg("logits_for_last") = true,
           "Appends `tokens` to `sequence` from `first_position`; logits for the last one.")
      .def("clear", &Batch::clear)
      .def("__len__", &Batch::size)
      .def_ro("tokens", &Batch::tokens)
      .def_ro("positions", &Batch::positions)
      .def_ro("sequences", &Batch::sequences)
      .def_prop_ro("logits", [](const Batch& b) { return std::vector<bool>(b.logits.begin(), b.logits.end()); });

  nb::class_<SamplerChain>(m, "SamplerChain",
                           R"(Samplers apart from decoding.

Logit bias, penalties, top-k, typical-p, top-p, min-p and temperature
(llama.cpp's order), then a seeded draw (argmax when temperature <= 0).)")
      .def(
          "__init__",
          [](SamplerChain* self, float temperature, int top_k, float top_p, float min_p, float repeat_penalty,
             int repeat_last_n, nb::handle seed, float typical_p, float presence_penalty, float frequency_penalty,
             std::map<int32_t, float> logit_bias) {
            SamplingOptions o{temperature,    top_k,     top_p,           min_p,
                              repeat_penalty, repeat_last_n, seed_arg(seed), typical_p,
                              presence_penalty, frequency_penalty, std::move(logit_bias)};
            check(validate_sampling(o));
            new (self) SamplerChain(SamplerChain::from(o));
          },
          nb::kw_only(), nb::arg("temperature") = 0.8, nb::arg("top_k") = 40, nb::arg("top_p") = 0.95,
          nb::arg("min_p") = 0.05, nb::arg("repeat_penalty") = 1.0, nb::arg("repeat_last_n") = 64,
          nb::arg("seed").none() = nb::none(), nb::arg("typical_p") = 1.0, nb::arg("presence_penalty") = 0.0,
          nb::arg("frequency_penalty") = 0.0, nb::arg("logit_bias") = std::map<int32_t, float>(),
          R"(A chain with these stages.

Args:
    temperature: <= 0 is greedy (argmax).
    top_k: keep the k most likely tokens (0: all).
    top_p: keep the most likely tokens up to this mass (1: all).
    min_p: drop tokens below min_p x the top probability (0: none).
    repeat_penalty: > 1 makes the last repeat_last_n tokens less likely.
    repeat_last_n: the penalties' window (0: off, -1: the whole history).
    seed: the random stream's seed; None or -1: a random one (see seed).
    typical_p: locally typical sampling mass (1: off).
    presence_penalty: subtracted from a token's logit when it occurs.
    frequency_penalty: subtracted per occurrence.
    logit_bias: {token id: value} added first (-inf bans a token).

Raises:
    ValueError: (InvalidArgumentError) a value out of range, named.)")
      .def_prop_ro("seed", &SamplerChain::seed, "The seed in use (the drawn one when random).")
      .def(
          "sample",
          [](SamplerChain& c, nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu> logits) {
            return c.sample(std::span<const float>(logits.data(), logits.shape(0)));
          },
          nb::arg("logits"), "A token id drawn from one row of float32 logits (not accepted; -1 when empty).")
      .def("accept", &SamplerChain::accept, nb::arg("token"), "Adds `token` to the repetition-penalty history.")
      .def("reset", &SamplerChain::reset, "Clears the history and restarts the random stream from the seed.");
}

}  // namespace layerstream::python

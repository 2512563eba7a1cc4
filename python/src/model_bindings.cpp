// Model (open with budgets and options, tokenizer, contexts), ModelInfo and
// make_example_model. Model.open releases the GIL while it loads; the
// progress callback takes it back to call Python and to check for Ctrl-C.
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "bindings.h"
#include "layerstream/units.h"

namespace layerstream::python {
namespace {

// What Model.open's progress callback shares with the call: the Python
// callable (borrowed; alive for the call) and the first Python error it met.
// The Model keeps its options (and so the callback) after open returns:
// `open` is cleared then, and the callback no longer touches Python.
struct ProgressBridge {
  PyObject* callable = nullptr;
  bool open = true;
  std::optional<nb::python_error> error;
};

std::shared_ptr<Model> open_model(const std::filesystem::path& path, nb::handle vram_budget, nb::handle ram_budget,
                                  Backend backend, double sim_link_gbps, int host_threads, IoPath io, int context,
                                  int sequences, int prefill_chunk, KvType kv_type, Strategy strategy, bool trace,
                                  nb::object progress, double host_factor) {
  ModelOptions o;
  o.vram_budget = size_arg(vram_budget, "vram_budget");
  o.ram_budget = size_arg(ram_budget, "ram_budget");
  o.backend = backend;
  o.sim_link_gbps = sim_link_gbps;
  o.host_threads = host_threads;
  o.io = io;
  o.context = context;
  o.sequences = sequences;
  o.prefill_chunk = prefill_chunk;
  o.kv_type = kv_type;
  o.strategy = strategy;
  o.host_compute_factor = host_factor;
  o.trace = trace;
  auto bridge = std::make_shared<ProgressBridge>();
  bridge->callable = progress.is_none() ? nullptr : progress.ptr();
  o.progress = [bridge](float fraction) {
    if (!bridge->open) return true;
    nb::gil_scoped_acquire gil;
    if (bridge->error) return false;
    if (PyErr_CheckSignals() != 0) {  // Ctrl-C while loading: cancel, re-raise after open returns
      bridge->error.emplace();
      return false;
    }
    if (!bridge->callable) return true;
    try {
      nb::object r = nb::borrow(bridge->callable)(fraction);
      return r.is_none() || nb::cast<bool>(r);
    } catch (nb::python_error& e) {
      bridge->error.emplace(std::move(e));
      return false;
    }
  };
  Result<std::shared_ptr<Model>> model = Status::Internal("not opened");
  {
    nb::gil_scoped_release release;
    model = Model::open(path.string(), o);
  }
  bridge->open = false;
  if (bridge->error) throw *bridge->error;
  return unwrap(std::move(model));
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<ModelInfo>(m, "ModelInfo", "What a model file is, from its metadata.")
      .def_ro("path", &ModelInfo::path)
      .def_ro("architecture", &ModelInfo::architecture)
      .def_ro("file_bytes", &ModelInfo::file_bytes)
      .def_ro("layers", &ModelInfo::layers)
      .def_ro("embedding", &ModelInfo::embedding)
      .def_ro("heads", &ModelInfo::heads)
      .def_ro("kv_heads", &ModelInfo::kv_heads)
      .def_ro("vocab", &ModelInfo::vocab)
      .def_ro("context", &ModelInfo::context)
      .def("__repr__", [](const ModelInfo& i) {
        return "ModelInfo(" + i.architecture + ", " + std::to_string(i.layers) + " layers, embedding " +
               std::to_string(i.embedding) + ", vocab " + std::to_string(i.vocab) + ", " +
               format_bytes(i.file_bytes) + ")";
      });

  auto open_doc =
      "Opens a GGUF model within memory budgets: parses it and its tokenizer, places the layers (resident, "
      "pinned RAM, disk) and loads the resident and RAM tiers. Budgets are bytes or sizes like '512MiB' "
      "(vram_budget 0: CUDA 90% of free device memory, host what the model needs). `progress(fraction)` "
      "returning False cancels (CancelledError); Ctrl-C while loading raises KeyboardInterrupt. Raises "
      "IoError, CorruptionError, UnsupportedError, NotFoundError, InvalidArgumentError or OutOfBudgetError "
      "(which says what would fit). strategy HOST computes every non-resident block on the host from RAM; "
      "PLANNED with host_factor > 0 (a block's host time before measurement as a multiple of its device "
      "time) chooses per block: device, host, or split by output rows between the two.";
  nb::class_<Model>(m, "Model",
                    "One GGUF model opened on a device within memory budgets; it owns the weights, their "
                    "placement and the KV pool its contexts take sequences from. Usable from several threads.")
      .def(nb::new_(&open_model), nb::arg("path"), nb::kw_only(), nb::arg("vram_budget") = 0,
           nb::arg("ram_budget") = 0, nb::arg("backend") = Backend::kAuto, nb::arg("sim_link_gbps") = 0.0,
           nb::arg("host_threads") = 0, nb::arg("io") = IoPath::kAuto, nb::arg("context") = 0,
           nb::arg("sequences") = 1, nb::arg("prefill_chunk") = 256, nb::arg("kv_type") = KvType::kF32,
           nb::arg("strategy") = Strategy::kPlanned, nb::arg("trace") = false, nb::arg("progress") = nb::none(),
           nb::arg("host_factor") = 0.0, open_doc)
      .def_prop_ro("info", &Model::info, nb::rv_policy::reference_internal)
      .def("tokenize", &Model::tokenize, nb::arg("text"), nb::arg("add_bos") = true, "Token ids of `text`.")
      .def("detokenize", &Model::detokenize, nb::arg("tokens"), "The text of token ids.")
      .def("is_end_of_generation", &Model::is_end_of_generation, nb::arg("token"))
      .def_prop_ro("n_vocab", &Model::n_vocab)
      .def_prop_ro("n_context", &Model::n_context, "Positions per sequence.")
      .def_prop_ro("free_sequences", &Model::free_sequences, "Sequences of the KV pool no context holds.")
      .def_prop_ro("load_bytes", &Model::load_bytes, "Bytes loaded into the resident and RAM tiers at open.")
      .def_prop_ro("placement", &Model::placement, "The placement of the layers, for people.")
      .def(
          "create_context",
          [](std::shared_ptr<Model> model, int sequences) {
            ContextOptions co;
            co.sequences = sequences;
            auto ctx = unwrap(model->create_context(co));
            return PyContext{std::move(model), std::move(ctx)};
          },
          nb::arg("sequences") = 1,
          "A Context with `sequences` KV sequences from the model's pool (OutOfBudgetError when fewer are "
          "free).");

  m.def(
      "make_example_model",
      [](const std::filesystem::path& path, nb::handle size, const std::string& dtype, uint64_t seed) {
        ExampleModelOptions o;
        o.target_bytes = size_arg(size, "size");
        o.dtype = dtype;
        o.seed = seed;
        Status s;
        {
          nb::gil_scoped_release release;
          s = make_example_model(path.string(), o);
        }
        check(s);
      },
      nb::arg("path"), nb::kw_only(), nb::arg("size") = 0, nb::arg("dtype") = "f16", nb::arg("seed") = 1,
      "Writes the example model (a Llama GGUF with pseudo-random weights and a tokenizer) to `path`. size 0: "
      "a tiny 4-layer model (~1 MiB); else about that many bytes. dtype: f32, f16, bf16, q8_0, q4_0, q4_1. "
      "OutOfBudgetError, before writing, when it would not fit the free disk.");
}

}  // namespace layerstream::python

// Model (open with budgets and options, tokenizer, metadata, contexts,
// close), ModelInfo and make_example_model. Model.open releases the GIL
// while it loads; the progress callback takes it back to call Python and to
// check for Ctrl-C.
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
  if (!model.ok()) raise_status(model.status(), path.string());
  return std::move(model).value();
}

// The file's metadata as llama.cpp's llama_model_meta_val_str gives it.
nb::dict metadata_of(const Model& model) {
  nb::dict out;
  for (const auto& [key, text] : model.metadata()) out[utf8_text(key)] = utf8_text(text);
  return out;
}

// A getter calling `Method` on the model, or ValueError naming `what` once
// it is closed.
template <auto Method>
auto on_open(const char* what) {
  return [what](const PyModel& pm) { return (pm.open(what).*Method)(); };
}

nb::object detokenize(const PyModel& pm, const std::vector<int32_t>& tokens, bool as_bytes) {
  const std::string bytes = pm.open("detokenize").detokenize(tokens);
  if (as_bytes) return nb::bytes(bytes.data(), bytes.size());
  return utf8_text(bytes);
}

constexpr const char* kModelDoc = R"(One GGUF model opened within memory budgets.

It owns the weights, their placement (resident, pinned RAM, disk) and the
KV pool its contexts take sequences from. Usable from several threads; use
one Context per thread. close() (or a with block) drops the model at once;
contexts still open keep it alive until they close.)";

constexpr const char* kOpenDoc = R"(Opens a GGUF model within memory budgets.

Parses the file and its tokenizer, places the layers and loads the
resident and RAM tiers.

Args:
    path: the GGUF file.
    vram_budget: device bytes, an int or a size like '512MiB'
        (0: CUDA 90% of free device memory, host what the model needs).
    ram_budget: pinned host bytes for the RAM tier (0: what fits).
    backend: where layers compute (AUTO: CUDA when present).
    sim_link_gbps: simulated host-to-device link speed (0: real).
    host_threads: threads of the host backend (0: all cores).
    io: how disk-tier layers are read.
    context: positions per sequence (0: the file's training context).
    sequences: KV sequences in the model's pool.
    prefill_chunk: most tokens per prefill pass.
    kv_type: element type of the KV cache.
    strategy: how layers are placed; HOST computes every non-resident
        block on the host from RAM.
    trace: record passes for Context.write_trace.
    progress: called with the loaded fraction; returning False cancels.
    host_factor: an override: with PLANNED, a block's host time before
        measurement as a multiple of its device time (0: predicted, equal
        to the device's on the host backend, unknown on a GPU until
        measured). PLANNED chooses per block (device, host, or split)
        whatever its value.

Raises:
    FileNotFoundError: (IoError) the file does not exist.
    CorruptionError, UnsupportedError, NotFoundError: the file.
    ValueError: (InvalidArgumentError) an option.
    MemoryError: (OutOfBudgetError) the budget cannot hold the model;
        the message says what would fit.
    CancelledError: progress returned False.
    KeyboardInterrupt: Ctrl-C while loading.)";

}  // namespace

Model& PyModel::open(const char* what) const {
  if (!model) throw nb::value_error((std::string(what) + ": the model is closed").c_str());
  return *model;
}

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

  nb::class_<PyModel>(m, "Model", kModelDoc)
      .def("__init__",
           [](PyModel* self, const std::filesystem::path& path, nb::handle vram_budget, nb::handle ram_budget,
              Backend backend, double sim_link_gbps, int host_threads, IoPath io, int context, int sequences,
              int prefill_chunk, KvType kv_type, Strategy strategy, bool trace, nb::object progress,
              double host_factor) {
             new (self) PyModel{open_model(path, vram_budget, ram_budget, backend, sim_link_gbps, host_threads, io,
                                           context, sequences, prefill_chunk, kv_type, strategy, trace,
                                           std::move(progress), host_factor)};
           },
           nb::arg("path"), nb::kw_only(), nb::arg("vram_budget") = 0, nb::arg("ram_budget") = 0,
           nb::arg("backend") = Backend::kAuto, nb::arg("sim_link_gbps") = 0.0, nb::arg("host_threads") = 0,
           nb::arg("io") = IoPath::kAuto, nb::arg("context") = 0, nb::arg("sequences") = 1,
           nb::arg("prefill_chunk") = 256, nb::arg("kv_type") = KvType::kF32,
           nb::arg("strategy") = Strategy::kPlanned, nb::arg("trace") = false, nb::arg("progress") = nb::none(),
           nb::arg("host_factor") = 0.0, kOpenDoc)
      .def_prop_ro("info", on_open<&Model::info>("info"), "What the file is (ModelInfo).")
      .def_prop_ro("metadata", [](const PyModel& pm) { return metadata_of(pm.open("metadata")); },
                   "The file's metadata keys whose values are not arrays, as strings\n"
                   "(like llama-cpp-python's Llama.metadata).")
      .def(
          "tokenize",
          [](const PyModel& pm, const std::string& text, bool add_special, bool parse_special) {
            return pm.open("tokenize").tokenize(text, add_special, parse_special);
          },
          nb::arg("text"), nb::arg("add_special") = true, nb::arg("parse_special") = false,
          R"(Token ids of `text`.

Args:
    text: the text to tokenize.
    add_special: add BOS/EOS where the file's tokenizer asks for them
        (tokenizer.ggml.add_bos_token / add_eos_token).
    parse_special: turn special tokens written in the text (<|im_start|>)
        into their ids; False tokenizes them as plain text.)")
      .def("detokenize", &detokenize, nb::arg("tokens"), nb::kw_only(), nb::arg("as_bytes") = false,
           R"(The text of token ids.

Args:
    tokens: token ids.
    as_bytes: return the raw UTF-8 bytes (what llama-cpp-python's
        Llama.detokenize returns); else a str in which bytes that are not
        valid UTF-8 (a lone byte-fallback token) read as U+FFFD.)")
      .def(
          "is_end_of_generation",
          [](const PyModel& pm, int32_t token) { return pm.open("is_end_of_generation").is_end_of_generation(token); },
          nb::arg("token"), "True when `token` ends a generation (EOS, EOT and the file's other end tokens).")
      .def("token_bos", on_open<&Model::token_bos>("token_bos"),
           "The beginning-of-sequence token id (-1 when the file names none).")
      .def("token_eos", on_open<&Model::token_eos>("token_eos"),
           "The end-of-sequence token id (-1 when the file names none).")
      .def("n_ctx", on_open<&Model::n_context>("n_ctx"), "Positions per sequence (the context length).")
      .def_prop_ro("n_vocab", on_open<&Model::n_vocab>("n_vocab"), "Tokens in the vocabulary.")
      .def_prop_ro("n_context", on_open<&Model::n_context>("n_context"), "Positions per sequence.")
      .def_prop_ro("free_sequences", on_open<&Model::free_sequences>("free_sequences"),
                   "Sequences of the KV pool no context holds.")
      .def_prop_ro("load_bytes", on_open<&Model::load_bytes>("load_bytes"),
                   "Bytes loaded into the resident and RAM tiers at open.")
      .def_prop_ro("placement", on_open<&Model::placement>("placement"), "The placement of the layers, for people.")
      .def_prop_ro(
          "closed", [](const PyModel& pm) { return !pm.model; }, "True once close() ran.")
      .def(
          "create_context",
          [](const PyModel& pm, int sequences) {
            std::shared_ptr<Model> model = pm.model;
            ContextOptions co;
            co.sequences = sequences;
            auto ctx = unwrap(pm.open("create_context").create_context(co));
            return PyContext{std::move(model), std::move(ctx)};
          },
          nb::arg("sequences") = 1,
          R"(A Context with `sequences` KV sequences from the model's pool.

Raises:
    MemoryError: (OutOfBudgetError) fewer sequences are free.)")
      .def(
          "close", [](PyModel& pm) { pm.model.reset(); },
          "Drops the model now (contexts still open keep it until they close). Idempotent.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__", [](PyModel& pm, nb::handle, nb::handle, nb::handle) { pm.model.reset(); },
          nb::arg("exc_type").none(), nb::arg("exc_value").none(), nb::arg("traceback").none());

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
        if (!s.ok()) raise_status(s, path.string());
      },
      nb::arg("path"), nb::kw_only(), nb::arg("size") = 0, nb::arg("dtype") = "f16", nb::arg("seed") = 1,
      R"(Writes the example model to `path`.

A Llama GGUF with pseudo-random weights and a tokenizer.

Args:
    path: where to write it.
    size: 0 for a tiny 4-layer model (~1 MiB); else about that many bytes
        (an int or a size like '24MiB').
    dtype: f32, f16, bf16, q8_0, q4_0 or q4_1.
    seed: seed of the weights.

Raises:
    MemoryError: (OutOfBudgetError) before writing, when it would not
        fit the free disk.)");
}

}  // namespace layerstream::python

// Model.plan: the memory plan of a model file (each part's bytes, the least
// budget that runs, per budget the placement and predicted speed) without
// loading it. Releases the GIL (it may measure the box).
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace layerstream::python {

void bind_plan(nb::module_& m) {
  nb::class_<BudgetPlan>(m, "BudgetPlan", "One budget's placement and predicted speed.")
      .def_ro("vram_bytes", &BudgetPlan::vram_bytes)
      .def_ro("ram_bytes", &BudgetPlan::ram_bytes)
      .def_ro("fits", &BudgetPlan::fits, "False: below the minimum (why in `placement`).")
      .def_ro("layers_resident", &BudgetPlan::layers_resident)
      .def_ro("layers_ram", &BudgetPlan::layers_ram)
      .def_ro("layers_disk", &BudgetPlan::layers_disk)
      .def_ro("slots", &BudgetPlan::slots)
      .def_ro("placement", &BudgetPlan::placement)
      .def_ro("predicted_decode_pass_s", &BudgetPlan::predicted_decode_pass_s)
      .def_ro("predicted_decode_tokens_per_s", &BudgetPlan::predicted_decode_tokens_per_s)
      .def_ro("predicted_prefill_tokens_per_s", &BudgetPlan::predicted_prefill_tokens_per_s);

  nb::class_<MemoryPlan>(m, "MemoryPlan", "How much memory a model needs and how fast it runs per budget.")
      .def_ro("model", &MemoryPlan::model)
      .def_ro("context", &MemoryPlan::context)
      .def_ro("sequences", &MemoryPlan::sequences)
      .def_ro("pass_tokens", &MemoryPlan::pass_tokens)
      .def_ro("kv_type", &MemoryPlan::kv_type)
      .def_ro("weight_bytes", &MemoryPlan::weight_bytes)
      .def_ro("largest_layer_bytes", &MemoryPlan::largest_layer_bytes)
      .def_ro("kv_bytes", &MemoryPlan::kv_bytes)
      .def_ro("activation_bytes", &MemoryPlan::activation_bytes)
      .def_ro("min_vram_bytes", &MemoryPlan::min_vram_bytes, "The least that runs with the planned strategy: KV + activations,\n"
              "and a window slot unless every block can compute on the host.")
      .def_ro("all_resident_vram_bytes", &MemoryPlan::all_resident_vram_bytes)
      .def_ro("figures_source", &MemoryPlan::figures_source)
      .def_ro("link_gbps", &MemoryPlan::link_gbps)
      .def_ro("disk_gbps", &MemoryPlan::disk_gbps)
      .def_ro("budgets", &MemoryPlan::budgets);

  nb::handle model_class = m.attr("Model");
  auto plan = [](const std::filesystem::path& path, int context, int sequences, int prefill_chunk, KvType kv_type,
                 Backend backend, double sim_link_gbps, int host_threads, IoPath io, const std::string& box,
                 nb::handle vram_budget, nb::handle ram_budget, int budgets) {
    const PlanOptions o{.context = context,
                        .sequences = sequences,
                        .prefill_chunk = prefill_chunk,
                        .kv_type = kv_type,
                        .backend = backend,
                        .sim_link_gbps = sim_link_gbps,
                        .host_threads = host_threads,
                        .io = io,
                        .box = box,
                        .vram_budget = size_arg(vram_budget, "vram_budget"),
                        .ram_budget = size_arg(ram_budget, "ram_budget"),
                        .budgets = budgets};
    Result<MemoryPlan> r = Status::Internal("not planned");
    {
      nb::gil_scoped_release release;
      r = Model::plan(path.string(), o);
    }
    if (!r.ok()) raise_status(r.status(), path.string());
    return std::move(r).value();
  };
  nb::cast<nb::class_<PyModel>>(model_class)
      .def_static("plan", plan, nb::arg("path"), nb::kw_only(), nb::arg("context") = 0, nb::arg("sequences") = 1,
                  nb::arg("prefill_chunk") = 256, nb::arg("kv_type") = KvType::kF32,
                  nb::arg("backend") = Backend::kAuto, nb::arg("sim_link_gbps") = 0.0, nb::arg("host_threads") = 0,
                  nb::arg("io") = IoPath::kAuto, nb::arg("box") = "", nb::arg("vram_budget") = 0,
                  nb::arg("ram_budget") = 0, nb::arg("budgets") = 8,
                  R"(The memory plan of a model file, without loading it.

Each part's bytes, the smallest budget that runs, the all-resident budget
and, per budget, the placement and predicted tokens/s.

Args:
    path: the GGUF file.
    context, sequences, prefill_chunk, kv_type, backend, sim_link_gbps,
    host_threads, io: as for Model().
    box: a `layerstream probe --json` file with the machine's figures
        ("": measure them now, seconds).
    vram_budget, ram_budget: plan for this budget too (0: none).
    budgets: how many budgets between the least and all-resident.)");
}

}  // namespace layerstream::python

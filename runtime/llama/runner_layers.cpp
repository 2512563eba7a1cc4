#include "runtime/llama/runner_layers.h"

#include <tuple>

#include "runtime/llama/runner_strategy.h"

namespace layerstream::llama {

namespace {

// The file bytes one executor layer streams: its span, or for a tied head
// token_embd's.
std::pair<uint64_t, uint64_t> layer_extent(const LlamaModel& m, const ModelLayer& ml) {
  if (ml.kind == LayerKind::kHead && m.output_tied) return {m.token_embd.offset, m.token_embd.n_bytes};
  return {ml.span_begin, ml.span_bytes()};
}

}  // namespace

Result<RunnerLayers> runner_layers(const LlamaModel& m, const std::string& path, const RunnerOptions& o) {
  if (!o.pins.empty() && o.pins.size() != m.layers.size())
    return Status::InvalidArgument("pins has " + std::to_string(o.pins.size()) + " entries, the model has " +
                                   std::to_string(m.layers.size()) + " layers");
  RunnerLayers out;
  const bool host_ok = blocks_host_ok(o);
  for (size_t li = 0; li < m.layers.size(); ++li) {
    const ModelLayer& ml = m.layers[li];
    if (ml.kind == LayerKind::kEmbedding) continue;
    if (ml.kind == LayerKind::kHead) out.head = static_cast<int>(out.specs.size());
    sched::LayerSpec spec;
    spec.name = ml.name;
    spec.file = path;
    std::tie(spec.file_offset, spec.bytes) = layer_extent(m, ml);
    spec.host_ok = ml.kind == LayerKind::kBlock && host_ok;
    if (li < o.pins.size()) spec.pin = o.pins[li];
    out.specs.push_back(std::move(spec));
    out.block.push_back(ml.kind == LayerKind::kBlock ? ml.block : -1);
  }
  return out;
}

}  // namespace layerstream::llama

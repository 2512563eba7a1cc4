// make_example_model and format_stats (layerstream/layerstream.h).
#include <cstdio>

#include "layerstream/layerstream.h"
#include "layerstream/units.h"
#include "runtime/core/status_macros.h"
#include "runtime/model/disk_space.h"
#include "runtime/model/example_model.h"

namespace layerstream {

Status make_example_model(const std::string& path, const ExampleModelOptions& o) {
  auto type = parse_ggml_type(o.dtype);
  if (!type) return Status::InvalidArgument("unknown dtype '" + o.dtype + "'");
  ExampleModelSpec spec;
  if (o.target_bytes) {
    LS_ASSIGN_OR_RETURN(spec, example_spec_for_size(o.target_bytes, *type, o.seed));
  } else {
    spec.n_embd = 128;
    spec.n_ff = 352;
    spec.n_ctx = 512;
    spec.dtype = *type;
    spec.seed = o.seed;
  }
  LS_ASSIGN_OR_RETURN(GgufWriter layout, example_model_layout(spec));
  LS_RETURN_IF_ERROR(check_free_disk(path, layout.file_size(), "the example model"));
  ExampleWriteOptions wo;
  wo.fsync = false;
  return write_example_model(path, spec, wo);
}

std::string format_stats(const Stats& s) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "prefill: %d tokens x %d in %.3f s (%.1f tokens/s)\n"
                "generated %d tokens; decode %.3f s (%.2f tokens/s), pass %.2f ms (predicted %.2f ms, lower bound %.2f ms)\n"
                "overlap efficiency: %.0f%% (lower bound / measured)\n"
                "streamed: %s per token, %s per pass\n"
                "layers: %d resident, %d ram, %d disk (model %s, vram budget %s, ram budget %s, KV %s, loaded %s)\n",
                s.prompt_tokens, s.batch, s.prefill_s, s.prefill_tokens_per_s, s.generated_tokens, s.decode_s,
                s.decode_tokens_per_s, s.mean_decode_pass_ms, s.mean_predicted_pass_ms, s.mean_lower_bound_ms,
                s.overlap_efficiency * 100, format_bytes(uint64_t(s.bytes_streamed_per_token)).c_str(),
                format_bytes(s.bytes_streamed_per_pass).c_str(), s.layers_resident, s.layers_ram, s.layers_disk,
                format_bytes(s.model_bytes).c_str(), format_bytes(s.vram_budget).c_str(),
                format_bytes(s.ram_budget).c_str(), format_bytes(s.kv_bytes).c_str(),
                format_bytes(s.load_bytes).c_str());
  std::string out = std::string(buf) + "plan: " + s.plan + " on " + s.device + " (" + s.backend + ")\n";
  if (s.disk_gbps > 0) {
    std::snprintf(buf, sizeof buf, "disk: %.2f GB/s measured over the decode passes' reads\n", s.disk_gbps);
    out += buf;
  }
  return out;
}

}  // namespace layerstream

// Small example models (and the host device to run them on) for the suites
// that exercise the runner, the probes and the model files on real files.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/math/ggml_type.h"
#include "runtime/model/example_model.h"
#include "tests/common/host_device.h"

namespace layerstream::testing {

// 4 layers, n_embd 64, n_ff 128, 4 query heads over 2 KV heads (GQA),
// vocab 512, trained context `n_ctx`; every matrix `dtype`, norms F32.
// A few hundred KiB at F32: written and run in milliseconds.
inline ExampleModelSpec tiny_llama_spec(GgmlType dtype, uint64_t seed, uint32_t n_ctx) {
  return {.n_layers = 4, .n_embd = 64, .n_ff = 128, .n_head = 4, .n_head_kv = 2, .n_vocab = 512, .n_ctx = n_ctx,
          .dtype = dtype, .seed = seed};
}

// Writes `spec` to `path` without waiting for the disk: a scratch file.
inline Status write_scratch_model(const std::string& path, const ExampleModelSpec& spec) {
  ExampleWriteOptions wo;
  wo.fsync = false;
  return write_example_model(path, spec, wo);
}

}  // namespace layerstream::testing

// A tiny Llama example model and a host device to run it on, for the suites
// that exercise the runner on real files (write it with write_example_model).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "kernels/math/ggml_type.h"
#include "runtime/device/device.h"
#include "runtime/model/example_model.h"

namespace layerstream::testing {

// 4 layers, n_embd 64, n_ff 128, 4 query heads over 2 KV heads (GQA),
// vocab 512, trained context `n_ctx`; every matrix `dtype`, norms F32.
// A few hundred KiB at F32: written and run in milliseconds.
inline ExampleModelSpec tiny_llama_spec(GgmlType dtype, uint64_t seed, uint32_t n_ctx) {
  ExampleModelSpec s;
  s.n_layers = 4;
  s.n_embd = 64;
  s.n_ff = 128;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_vocab = 512;
  s.n_ctx = n_ctx;
  s.dtype = dtype;
  s.seed = seed;
  return s;
}

// The host backend with `threads` compute threads; a test failure (and
// nullptr) if it cannot be opened.
inline std::unique_ptr<Device> open_host_device(int threads) {
  DeviceOptions o;
  o.backend = BackendKind::kHost;
  o.host_threads = threads;
  auto d = open_device(o);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : nullptr;
}

}  // namespace layerstream::testing

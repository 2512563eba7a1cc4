// Model shapes without files: a Llama-family layer stack described by its
// hyper-parameters and weight types (an ExampleModelSpec: the example model's
// shape and type mix), seen as the GGUF file the example-model generator
// would write, but with no tensor data. `layerstream plan --shape` and `bench
// --shape --box` plan and predict a model too large to make on this machine
// (a 40 GB 70B file) from it: sizes, offsets and types are exact; the data is
// never read.
#pragma once

#include <string>
#include <string_view>

#include "layerstream/status.h"
#include "runtime/model/example_model.h"
#include "runtime/model/gguf_file.h"

namespace layerstream {

// A shape description: a preset name, or a comma-separated key=value list.
//   presets: llama-70b-q4_k_m (Llama-3-70B: 80 layers, hidden 8192, ffn
//     28672, 64 heads, 8 KV heads, vocab 128256, context 8192, Q4_K_M mix),
//     llama-8b-q4_k_m (32, 4096, 14336, 32, 8, 128256, 8192),
//     qwen3-30b-a3b-q4_k_m (Qwen3-30B-A3B, qwen3moe: 48 layers, hidden 2048,
//     32 heads, 4 KV heads, head_dim 128, 128 experts of width 768, 8 used,
//     vocab 151936, context 40960, Q4_K_M mix);
//     a preset may be followed by ",key=value" overrides.
//   keys: layers, hidden, ffn, heads, kv_heads, head_dim, vocab, ctx, dtype (a
//     matrix type or a mix: q8_0, q4_k, q4_k_m, ...), tied (0/1), and for a
//     mixture of experts arch (qwen3moe, mixtral, gpt-oss; default llama), experts,
//     experts_used, expert_ffn (each expert's width; the same field as ffn).
// InvalidArgument naming the key or value when it is not one of these, or
// when the shape is not a valid model (validate_example_spec).
Result<ExampleModelSpec> parse_model_shape(std::string_view text);

// The GGUF file the example-model generator would write for `spec`, parsed
// from its header with zeros for data; path() is `name`. Never open it: the
// bytes are not on disk.
Result<GgufFile> model_shape_file(const ExampleModelSpec& spec, const std::string& name);

}  // namespace layerstream

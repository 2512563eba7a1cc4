// The Llama-family view of a GGUF file (architectures llama, mistral,
// qwen2): validated hyper-parameters, the tensors of every block, and the
// file as a sequence of *layers* (embedding, block 0..n-1, head) each with
// the byte span the runtime reads to load it.
//
// Weight shapes, in GGUF order [ne0, ne1] (ne0 contiguous, so a weight
// [n_in, n_out] is a row-major n_out x n_in matrix):
//   token_embd   [n_embd, n_vocab]
//   attn_norm    [n_embd]                 ffn_norm  [n_embd]
//   attn_q       [n_embd, n_head*hd]      attn_q.bias [n_head*hd] (optional)
//   attn_k/v     [n_embd, n_head_kv*hd]   attn_k/v.bias [n_head_kv*hd] (optional)
//   attn_output  [n_head*hd, n_embd]
//   ffn_gate/up  [n_embd, n_ff]           ffn_down  [n_ff, n_embd]
//   output_norm  [n_embd]                 output    [n_embd, n_vocab] (absent: tied to token_embd)
// Norms and biases are F32; matrices any supported type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/model/gguf_file.h"

namespace layerstream {

inline constexpr uint64_t kDirectIoAlignment = 4096;

struct LlamaHparams {
  std::string arch;           // general.architecture: "llama", "mistral", "qwen2"
  uint32_t n_layers = 0;      // <arch>.block_count
  uint32_t n_embd = 0;        // <arch>.embedding_length
  uint32_t n_ff = 0;          // <arch>.feed_forward_length
  uint32_t n_head = 0;        // <arch>.attention.head_count
  uint32_t n_head_kv = 0;     // <arch>.attention.head_count_kv (default n_head)
  uint32_t head_dim = 0;      // n_embd / n_head (or <arch>.attention.key_length)
  uint32_t n_rot = 0;         // <arch>.rope.dimension_count (default head_dim)
  uint32_t n_ctx_train = 0;   // <arch>.context_length
  uint32_t n_vocab = 0;       // from token_embd ne1
  float rms_eps = 1e-5f;      // <arch>.attention.layer_norm_rms_epsilon
  float rope_freq_base = 10000.0f;  // <arch>.rope.freq_base
  std::string rope_scaling_type = "none";  // <arch>.rope.scaling.type: none, linear, yarn
  float rope_scaling_factor = 1.0f;        // <arch>.rope.scaling.factor
  uint32_t rope_scaling_orig_ctx = 0;      // <arch>.rope.scaling.original_context_length
  bool rope_neox = false;     // true: pairs (i, i + n_rot/2) (qwen2); false: adjacent pairs (llama)
};

struct LlamaBlock {
  GgufTensorInfo attn_norm, attn_q, attn_k, attn_v, attn_output;
  GgufTensorInfo ffn_norm, ffn_gate, ffn_up, ffn_down;
  std::optional<GgufTensorInfo> attn_q_bias, attn_k_bias, attn_v_bias;
};

enum class LayerKind { kEmbedding, kBlock, kHead };

// A byte range of the file, and the same range widened to kDirectIoAlignment.
struct ByteRange {
  uint64_t begin = 0, end = 0;
  uint64_t aligned_begin = 0, aligned_end = 0;
  bool operator==(const ByteRange&) const = default;
};

// One unit of placement and streaming. The tensors lie in [span_begin,
// span_end); [aligned_begin, aligned_end) is that span widened to
// kDirectIoAlignment for O_DIRECT reads (aligned_end may pass the end of the
// file by less than 4096 bytes: such a read returns short).
// `ranges` are the tensors' bytes coalesced into disjoint, sorted ranges
// (gaps of alignment padding are absorbed): one range for every layer of a
// well-ordered file; two for a head whose output is tied to token_embd
// (output_norm at the end of the file, token_embd at the start), where
// reading `ranges` avoids reading the whole file that the span covers.
struct ModelLayer {
  LayerKind kind = LayerKind::kBlock;
  std::string name;        // "embedding", "blk.3", "head"
  int block = -1;          // block index for kBlock, -1 otherwise
  std::vector<GgufTensorInfo> tensors;
  uint64_t tensor_bytes = 0;  // sum of the tensors' sizes
  uint64_t span_begin = 0, span_end = 0;
  uint64_t aligned_begin = 0, aligned_end = 0;
  std::vector<ByteRange> ranges;
  uint64_t span_bytes() const { return span_end - span_begin; }
  uint64_t aligned_bytes() const { return aligned_end - aligned_begin; }
};

struct LlamaModel {
  LlamaHparams hparams;
  GgufTensorInfo token_embd, output_norm, output;
  bool output_tied = false;  // output is token_embd (no "output.weight" in the file)
  std::vector<LlamaBlock> blocks;
  // layers[0] = embedding, layers[1 + i] = block i, layers.back() = head
  // (output_norm + output; with a tied output it contains token_embd again).
  std::vector<ModelLayer> layers;
  uint64_t total_tensor_bytes = 0;  // every tensor the model uses, once
};

// Builds and validates the Llama view. Errors name the file and the key or
// tensor: Unsupported for another architecture ("architecture 'gpt2' is not
// supported") or tensor type; NotFound for a missing key or tensor;
// Corruption for bad hyper-parameters or a misshapen tensor.
Result<LlamaModel> load_llama_model(const GgufFile& file);

// The architectures load_llama_model accepts.
bool is_llama_family(const std::string& arch);

}  // namespace layerstream

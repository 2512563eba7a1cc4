// The Llama-family view of a GGUF file (architectures llama, mistral,
// qwen2, qwen3, gemma3, and the mixtures of experts qwen3moe, gpt-oss and
// llama with <arch>.expert_count, i.e. Mixtral): validated hyper-parameters, the tensors of every
// block, and the file as a sequence of *layers* (embedding, block 0..n-1,
// head) each with the byte span the runtime reads to load it. What an
// architecture does differently from llama is one ArchTraits value plus a
// few hyper-parameters (attention scale, sliding window), not another
// forward pass.
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
//   attn_q_norm, attn_k_norm [head_dim]   (qk_norm: qwen3, gemma3)
//   post_attention_norm, post_ffw_norm [n_embd]  (post_norms: gemma3)
//   rope_freqs   [n_rot/2]                (optional, global: Llama 3.1 RoPE frequency factors)
// Mixture-of-experts blocks (n_expert > 0) have, instead of ffn_gate/up/down:
//   ffn_gate_inp       [n_embd, n_expert]            (the router)
//   ffn_gate/up_exps   [n_embd, n_ff_exp, n_expert]  ffn_down_exps [n_ff_exp, n_embd, n_expert]
// gpt-oss (traits.gpt_oss) adds attn_sinks [n_head], attn_output.bias
// [n_embd], ffn_gate_inp.bias [n_expert], ffn_gate/up_exps.bias
// [n_ff_exp, n_expert], ffn_down_exps.bias [n_embd, n_expert], and names its
// FFN norm post_attention_norm.
// Each expert's matrix is one contiguous slice of its 3-D tensor (expert_slice).
// Norms and biases are F32; matrices any supported type. Norm weights are
// used as stored (Gemma's converter already folded its "1 + w").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/model/gguf_file.h"

namespace layerstream {

inline constexpr uint64_t kDirectIoAlignment = 4096;

// SwiGLU (llama), GeGLU with tanh-GELU (gemma), or gpt-oss's clamped SwiGLU (math::swiglu_oai).
enum class FfnActivation { kSilu, kGeluTanh, kSwigluOai };

// What an architecture changes in the Llama block. The runner reads these
// flags; it has one forward pass.
struct ArchTraits {
  bool rope_neox = false;    // RoPE pairs (i, i + n_rot/2) instead of adjacent pairs
  bool qk_norm = false;      // RMSNorm of each Q and K head (attn_q_norm / attn_k_norm) before RoPE
  bool post_norms = false;   // RMSNorm of the attention and FFN outputs before each residual add
  bool embed_scale = false;  // token embeddings multiplied by sqrt(n_embd)
  FfnActivation ffn = FfnActivation::kSilu;
  bool sliding_window = false;  // layers alternate local (windowed) and global attention
  uint32_t swa_pattern = 0;     // default sliding-window pattern: every pattern-th layer is global
  // gpt-oss: attn_sinks and attn_output.bias in every block; the router and
  // the experts with biases; the FFN norm stored as post_attention_norm;
  // sliding-window layers keep the global RoPE base unless the file says.
  bool gpt_oss = false;
};

// Traits of a supported architecture; nullptr for any other.
const ArchTraits* arch_traits(const std::string& arch);

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
  ArchTraits traits;          // arch_traits(arch)
  // Attention logit scale: <arch>.attention.scale, else gemma3's rule
  // (1/sqrt(key_length); 1/sqrt(n_embd/n_head) for the 62-layer 27B), else
  // 1/sqrt(head_dim).
  float attn_scale = 0;
  // Sliding-window attention (traits.sliding_window): <arch>.attention.sliding_window
  // positions; swa_layers[i] says whether block i is windowed (pattern from
  // <arch>.attention.sliding_window_pattern, default traits.swa_pattern:
  // layer i is local unless i % pattern == pattern - 1); local layers use
  // <arch>.rope.freq_base_swa (default 10000) as their RoPE base.
  uint32_t n_swa = 0;
  std::vector<bool> swa_layers;
  float rope_freq_base_swa = 10000.0f;
  // Mixture of experts: every block's FFN is n_expert experts of width
  // n_ff_exp (<arch>.expert_count, expert_used_count; qwen3moe's
  // expert_feed_forward_length, llama's feed_forward_length), of which each
  // token uses n_expert_used. 0 experts: a dense model.
  uint32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  bool is_moe() const { return n_expert > 0; }
  bool is_swa(uint32_t layer) const { return n_swa > 0 && layer < swa_layers.size() && swa_layers[layer]; }
  float rope_base(uint32_t layer) const { return is_swa(layer) ? rope_freq_base_swa : rope_freq_base; }
};

// The FFN of a mixture-of-experts block: the router and the experts' three
// matrices, each a 3-D tensor with one contiguous slice per expert.
struct MoeTensors {
  GgufTensorInfo router;                         // ffn_gate_inp
  GgufTensorInfo gate_exps, up_exps, down_exps;  // ffn_{gate,up,down}_exps
  // gpt-oss's biases (F32): the router's, and one row per expert of each matrix's.
  std::optional<GgufTensorInfo> router_bias, gate_bias, up_bias, down_bias;
};

// Where expert e's matrix lies in a 3-D expert tensor (dims[2] experts, one
// [dims[0], dims[1]] matrix each, contiguous): its file offset and bytes.
// The unit a per-expert placement reads. REQUIRES e < t.dims[2].
struct ExpertSlice {
  uint64_t offset = 0, bytes = 0;
};
ExpertSlice expert_slice(const GgufTensorInfo& t, uint32_t e);

struct LlamaBlock {
  GgufTensorInfo attn_norm, attn_q, attn_k, attn_v, attn_output;
  GgufTensorInfo ffn_norm;
  GgufTensorInfo ffn_gate, ffn_up, ffn_down;  // dense blocks only (empty when moe is set)
  std::optional<MoeTensors> moe;              // mixture-of-experts blocks only
  std::optional<GgufTensorInfo> attn_q_bias, attn_k_bias, attn_v_bias;
  std::optional<GgufTensorInfo> attn_q_norm, attn_k_norm;       // traits.qk_norm
  std::optional<GgufTensorInfo> attn_post_norm, ffn_post_norm;  // traits.post_norms
  std::optional<GgufTensorInfo> attn_output_bias, attn_sinks;    // traits.gpt_oss

  // The dense weight matrices, in pass order: Q, K, V, O, then gate, up,
  // down of a dense FFN (a mixture of experts' matrices are in `moe`).
  std::vector<const GgufTensorInfo*> matrices() const {
    if (moe) return {&attn_q, &attn_k, &attn_v, &attn_output};
    return {&attn_q, &attn_k, &attn_v, &attn_output, &ffn_gate, &ffn_up, &ffn_down};
  }
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
  // Llama 3.1 RoPE frequency factors, shared by every block; not part of any
  // layer (the runner keeps the few bytes in its reserved region).
  std::optional<GgufTensorInfo> rope_freqs;
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

// The kernel interface the executor calls: one Llama block's operations,
// implemented for the host backend (CpuKernels, kernels/cpu/) and the cuda
// backend (CudaKernels, kernels/cuda/).
//
// Every op validates its params, enqueues the work on `stream` and returns;
// errors found while the work runs surface at the stream's next synchronize().
// Pointers are device memory of the backend the Kernels object was made for
// (host backend: ordinary host memory; cuda: device memory) unless a field
// says "host". They must stay valid until the work completes. The caller owns
// all buffers; a Kernels object owns only its own small scratch.
//
// Shapes are row-major, outermost first. Activations are float32.
//
// KV cache layout (one per sequence): [layer][pos][n_kv_head][head_dim] of
// kv_type (F32 or F16), positions 0..n_ctx-1. An AttentionParams carries the
// base of one layer's K and V planes: element (pos, kvh, d) sits at
// k_cache + (pos * n_kv_head + kvh) * head_dim + d.
//
// Thread safety: a Kernels object is used by one host thread at a time (the
// scheduler's compute thread). CpuKernels runs the work on the stream's host
// thread and its own thread pool.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>

#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/device.h"

namespace layerstream::kernels {

// out[t][:] = decoded row tokens[t] of `table` ([n_vocab][n_embd] of `type`).
// Token ids outside [0, n_vocab) are an error (host) / a NaN row (cuda).
struct EmbeddingParams {
  const void* table = nullptr;
  GgmlType type = GgmlType::F32;
  int64_t n_vocab = 0, n_embd = 0;
  const int32_t* tokens = nullptr;  // [n_tokens]
  int64_t n_tokens = 0;
  float* out = nullptr;  // [n_tokens][n_embd]
};

// out[r][i] = x[r][i] / sqrt(mean_i(x[r]^2) + eps) * weight[i]. out may equal x.
struct RmsNormParams {
  const float* x = nullptr;       // [n_rows][n_cols]
  const float* weight = nullptr;  // [n_cols]
  float* out = nullptr;           // [n_rows][n_cols]
  int64_t n_rows = 0, n_cols = 0;
  float eps = 1e-5f;
};

// Rotary position embedding in place on x [n_tokens][n_heads][head_dim].
// The first n_rot dims of each head rotate (n_rot even, <= head_dim; 0 means
// head_dim). Pair i (0 <= i < n_rot/2) rotates by
//   theta = positions[t] * freq_scale * freq_base^(-2i/n_rot)
// Llama layout (neox = false): pairs (2i, 2i+1). Neox layout: (i, i + n_rot/2).
// freq_scale is GGUF linear scaling: 1 / rope.scaling.factor.
// freq_factors (optional, Llama 3.1 `rope_freqs`): theta of pair i is divided
// by freq_factors[i].
// YaRN (ext_factor != 0; llama.cpp's ggml_rope_ext arguments): pair i's angle
// blends the scaled theta with the unscaled one by a ramp over pair indices
// from beta_fast and beta_slow at n_ctx_orig positions (math::rope_yarn_theta),
// and both cos and sin are multiplied by math::rope_yarn_mscale (attn_factor,
// times 1 + 0.1 ln(1 / freq_scale)). ext_factor 0 (the default): no ramp and
// the magnitude is attn_factor.
struct RopeParams {
  float* x = nullptr;
  int64_t n_tokens = 0, n_heads = 0, head_dim = 0, n_rot = 0;
  const int32_t* positions = nullptr;  // [n_tokens]
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool neox = false;
  const float* freq_factors = nullptr;  // [n_rot / 2] or null (all 1)
  float ext_factor = 0.0f;              // YaRN's extrapolation mix (1: full YaRN)
  float attn_factor = 1.0f;             // magnitude of cos and sin
  float beta_fast = 32.0f, beta_slow = 1.0f;
  int32_t n_ctx_orig = 0;               // the training context YaRN extends (> 0 when ext_factor != 0)
};

// y[t][o] = sum_i w[o][i] * x[t][i]. w is a GGUF weight [ne0 = n_in, ne1 =
// n_out], i.e. row-major n_out x n_in of w_type (F32, F16, BF16, Q8_0, Q4_0,
// Q4_1; quantised types need n_in % 32 == 0). n_tokens == 1 is the
// matrix-vector product. `scratch` (optional, scratch_bytes long) lets the
// cuda backend dequantise/convert for cuBLAS at large n_tokens; ask
// Kernels::matmul_scratch_bytes for the size. y must not alias x.
// Batch invariance: a pass of at most kBatchInvariantTokens tokens gives
// each token the bits a one-token pass gives it, on every backend and path
// (CPU: the one-token kernels per token over each cached chunk of rows;
// CUDA: the matvec kernels). Speculative verification relies on it: a
// drafted chain checked in one pass must see the logits plain decoding sees.
// On the CPU's fast path, quantised weights keep it for passes of any size
// (the GEMM tiles sum as the one-token kernels do; Q4_1 on AVX-512 runs the
// x16 kernels throughout), except where AMX takes passes of 16 tokens or
// more; so does attention at any context length. Prefix reuse relies on that:
// KV written by one-token passes equals what a prefill writes.
constexpr int64_t kBatchInvariantTokens = 8;
struct MatmulParams {
  const void* w = nullptr;
  GgmlType w_type = GgmlType::F32;
  int64_t n_out = 0, n_in = 0;
  const float* x = nullptr;  // [n_tokens][n_in]
  int64_t n_tokens = 0;
  float* y = nullptr;  // [n_tokens][n_out]
  void* scratch = nullptr;
  uint64_t scratch_bytes = 0;
  // Optional: w in a layout these kernels prefer for one-token products
  // (Kernels::pack_weight), same values. Used where the kernels can (CPU:
  // Q4_1 on AVX-512 at any n_tokens, unless AMX runs the pass); w stays the
  // reference (null: none).
  const void* w_packed = nullptr;
};

// Grouped-query causal attention for one sequence. The n_tokens new tokens
// sit at positions start_pos .. start_pos + n_tokens - 1. First k_new/v_new
// (when non-null) are stored into the cache at those positions (converted to
// kv_type); then token t attends to cache positions 0 .. start_pos + t.
// Query head h uses KV head h / (n_head / n_kv_head).
//   out[t][h][:] = sum_p softmax_p(scale * q[t][h] . k[p][kvh]) * v[p][kvh]
// Decode is n_tokens == 1; prefill is n_tokens > 1 (causal within the batch).
// Sliding window (window > 0, Gemma's local layers): token t at position
// P = start_pos + t attends only to positions p with P - p < window.
// Attention sinks (sinks non-null, gpt-oss): head h's softmax has one more
// logit, sinks[h], in its denominator only (it weighs no value row):
//   out[t][h][:] = sum_p exp(s_p - m) v[p] / (exp(sinks[h] - m) + sum_p exp(s_p - m)),
//   m = max(sinks[h], max_p s_p).
// Largest head_dim attention supports (registers per lane on cuda).
constexpr int64_t kMaxHeadDim = 256;

struct AttentionParams {
  const float* q = nullptr;      // [n_tokens][n_head][head_dim]
  const float* k_new = nullptr;  // [n_tokens][n_kv_head][head_dim] or null
  const float* v_new = nullptr;  // [n_tokens][n_kv_head][head_dim] or null
  void* k_cache = nullptr;       // this layer's K plane: [n_ctx][n_kv_head][head_dim]
  void* v_cache = nullptr;       // this layer's V plane: same shape
  GgmlType kv_type = GgmlType::F32;  // F32 or F16
  int64_t n_ctx = 0;             // cache capacity in positions
  int64_t start_pos = 0;
  int64_t n_tokens = 0, n_head = 0, n_kv_head = 0, head_dim = 0;
  float scale = 0;  // 0 means 1/sqrt(head_dim)
  int64_t window = 0;  // 0: full causal attention; > 0: sliding window of that many positions
  const float* sinks = nullptr;  // [n_head] or null (no sinks)
  float* out = nullptr;  // [n_tokens][n_head][head_dim]; must not alias q
};

// out[i] = act(gate[i]) * up[i], a gated FFN activation. out may alias either.
//   kSilu: silu(g) = g / (1 + exp(-g)).
//   kGelu: the tanh approximation of GELU (Gemma's GeGLU):
//          gelu(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
//   kSwigluOai: gpt-oss's clamped SwiGLU, math::swiglu_oai (mixture-of-experts only).
enum class GatedActivation { kSilu, kGelu, kSwigluOai };
template <GatedActivation kAct>
struct GatedMulParams {
  const float* gate = nullptr;
  const float* up = nullptr;
  float* out = nullptr;
  int64_t n = 0;
};
using SiluMulParams = GatedMulParams<GatedActivation::kSilu>;
using GeluMulParams = GatedMulParams<GatedActivation::kGelu>;

// out[i] = x[i] * factor (Gemma's embedding scale). out may alias x.
struct ScaleParams {
  const float* x = nullptr;
  float* out = nullptr;
  int64_t n = 0;
  float factor = 1.0f;
};

// out[i] = a[i] + b[i] (the residual add). out may alias a or b.
struct AddParams {
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
  int64_t n = 0;
};

// Mixture-of-experts FFN (qwen3moe, Mixtral, gpt-oss). Per token t:
//   ids, weights = math::moe_route(router . x[t] + router_bias)   (moe_router.h:
//                  softmax, top n_used, weights renormalised over them)
//   out[t] = sum over the chosen experts e, in increasing e, of
//            weight_e * (down_e(act(gate_e . x[t] + gate_bias_e, up_e . x[t] + up_bias_e)) + down_bias_e)
// (a null bias is zero; gpt-oss has all four).
// router is [n_expert][n_embd]; gate/up/down are the 3-D expert tensors as
// GGUF stores them: expert e's matrix is the contiguous slice at e x (the
// tensor's bytes / n_expert), gate_e/up_e [n_ff][n_embd], down_e
// [n_embd][n_ff]. Tokens are gathered per expert: each chosen expert's
// matrices are multiplied once per call, by the rows of the tokens routed
// to it, with the same matmul kernels as a dense matrix (the CPU's exact or
// int8 path; the router always with f32 activations, so the choice of
// experts does not depend on the path's rounding of x). work is this
// backend's memory of moe_work_bytes(...) bytes (gathered rows, the
// router's logits, the routing); scratch as MatmulParams'.
struct MoeFfnParams {
  const float* x = nullptr;  // [n_tokens][n_embd]
  int64_t n_tokens = 0, n_embd = 0, n_ff = 0, n_expert = 0, n_used = 0;
  const void* router = nullptr;
  GgmlType router_type = GgmlType::F32;
  const void* gate = nullptr;
  GgmlType gate_type = GgmlType::F32;
  const void* up = nullptr;
  GgmlType up_type = GgmlType::F32;
  const void* down = nullptr;
  GgmlType down_type = GgmlType::F32;
  GatedActivation act = GatedActivation::kSilu;
  const float* router_bias = nullptr;                      // [n_expert] or null
  const float *gate_bias = nullptr, *up_bias = nullptr;   // [n_expert][n_ff] or null
  const float* down_bias = nullptr;                        // [n_expert][n_embd] or null
  float* out = nullptr;  // [n_tokens][n_embd]; must not alias x
  void* work = nullptr;
  uint64_t work_bytes = 0;
  void* scratch = nullptr;
  uint64_t scratch_bytes = 0;
};

// The work buffer of a MoeFfnParams call, carved from its start: router
// logits [T][n_expert], the routing ([T][n_used] ids and weights; per
// expert, the start of its rows, and the rows' tokens and weights grouped by
// expert), then the gathered activations [T][n_embd], gate and up
// [T][n_ff] and the expert's output [T][n_embd] (an expert gets at most
// every token once).
struct MoeWork {
  float* logits;
  int32_t* ids;
  float* weights;
  int32_t* expert_start;  // [n_expert + 1]
  int32_t* rows;          // [T * n_used]
  float* row_weights;     // [T * n_used]
  float *xg, *gate, *up, *y;
};
MoeWork moe_work(void* base, int64_t n_tokens, int64_t n_embd, int64_t n_ff, int64_t n_expert, int64_t n_used);
uint64_t moe_work_bytes(int64_t n_tokens, int64_t n_embd, int64_t n_ff, int64_t n_expert, int64_t n_used);
// Groups the routing of n_tokens tokens (w.ids, w.weights) by expert into
// w.expert_start, w.rows and w.row_weights (token order within an expert).
void moe_group_by_expert(const MoeWork& w, int64_t n_tokens, int64_t n_expert, int64_t n_used);
// The MatmulParams of expert e's slice of a 3-D expert tensor.
MatmulParams moe_expert_matmul(const void* tensor, GgmlType type, int64_t e, int64_t n_out, int64_t n_in,
                               const float* x, float* y, int64_t n_tokens);
// The router's logits [n_tokens][n_expert] of p.x into `logits`.
MatmulParams moe_router_matmul(const MoeFfnParams& p, float* logits);

// Picks one token from logits [n_vocab]. Deterministic given `seed`.
//   temperature <= 0 or top_k == 1: greedy (argmax, lowest index on ties).
//   otherwise: softmax(logits / temperature), keep the top_k most likely
//   (top_k <= 0: all), then the smallest prefix (by probability, descending)
//   whose mass reaches top_p (top_p >= 1: all), renormalise, draw with a
//   uniform number derived from `seed`.
// out_token is HOST memory, written when the stream reaches this op.
// cuda: greedy runs an argmax kernel; top-k/top-p copy the logits to pinned
// host memory and run the CPU sampler in a host function (stream order).
struct SampleParams {
  const float* logits = nullptr;
  int64_t n_vocab = 0;
  float temperature = 0;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int32_t* out_token = nullptr;  // host
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual BackendKind backend() const = 0;

  virtual Status embedding(const EmbeddingParams& p, Stream& stream) = 0;
  virtual Status rmsnorm(const RmsNormParams& p, Stream& stream) = 0;
  virtual Status rope(const RopeParams& p, Stream& stream) = 0;
  virtual Status matmul(const MatmulParams& p, Stream& stream) = 0;
  // Several matmuls over the same input (Q/K/V, gate/up): same x, n_in and
  // n_tokens, distinct outputs. The result is that of one matmul each (the
  // default); the CPU backend quantises x once and runs the decode products
  // as one pool job (one start and one join instead of one per matrix).
  virtual Status matmuls(const MatmulParams* ps, int n, Stream& stream) {
    for (int i = 0; i < n; ++i) LS_RETURN_IF_ERROR(matmul(ps[i], stream));
    return Status::OK();
  }
  virtual Status attention(const AttentionParams& p, Stream& stream) = 0;
  virtual Status silu_mul(const SiluMulParams& p, Stream& stream) = 0;
  virtual Status gelu_mul(const GeluMulParams& p, Stream& stream) = 0;
  virtual Status scale(const ScaleParams& p, Stream& stream) = 0;
  virtual Status add(const AddParams& p, Stream& stream) = 0;
  virtual Status sample(const SampleParams& p, Stream& stream) = 0;
  virtual Status moe_ffn(const MoeFfnParams& p, Stream& stream) = 0;

  // Scratch bytes matmul would use for these shapes to take its fastest path
  // (0 when none is needed). Less scratch is never an error, only slower.
  virtual uint64_t matmul_scratch_bytes(GgmlType w_type, int64_t n_out, int64_t n_in, int64_t n_tokens) const {
    return 0;
  }

  // A one-token layout for weight matrices (MatmulParams::w_packed): the
  // bytes of the packed copy of a (w_type, n_out x n_in) matrix, 0 when these
  // kernels have none for it (the default; the CPU kernels pack Q4_1 where
  // the CPU has AVX-512 VNNI). The copy is the caller's memory, beside w.
  virtual uint64_t packed_weight_bytes(GgmlType w_type, int64_t n_out, int64_t n_in) const { return 0; }
  // Enqueues on `stream` the packing of p.w (p.w_type, p.n_out x p.n_in) into
  // `out` (packed_weight_bytes bytes; stream-accessible, not overlapping w).
  virtual Status pack_weight(const MatmulParams& p, void* out, Stream& stream) {
    return Status::Unsupported("these kernels have no packed weight layout");
  }

  // Final norm + LM head: rmsnorm(x) into `normed`, then logits = W_out . normed.
  Status final_norm_lm_head(const RmsNormParams& norm, const MatmulParams& head, Stream& stream) {
    LS_RETURN_IF_ERROR(rmsnorm(norm, stream));
    return matmul(head, stream);
  }
};

struct KernelsOptions {
  int host_threads = 0;  // CPU kernels' thread pool size (0 = hardware concurrency)
  // CPU matmul with f32 activations (today's numerics, what the float64
  // parity tests use) instead of the fast int8-activation path. cuda: unused.
  bool exact = false;
};

// Kernels for a resolved backend (kHost or kCuda). kCuda in a build without
// CUDA, or without a usable device, is an error saying why; kAuto is
// InvalidArgument (resolve it with open_device first).
Result<std::unique_ptr<Kernels>> make_kernels(BackendKind backend, const KernelsOptions& options = {});

// Argument checks shared by both backends: InvalidArgument naming the op,
// the field, its value and the limit.
Status validate(const EmbeddingParams& p);
Status validate(const RmsNormParams& p);
Status validate(const RopeParams& p);
Status validate(const MatmulParams& p);
Status validate(const AttentionParams& p);
Status validate(const SiluMulParams& p);
Status validate(const GeluMulParams& p);
Status validate(const ScaleParams& p);
Status validate(const AddParams& p);
Status validate(const SampleParams& p);
Status validate(const MoeFfnParams& p);

}  // namespace layerstream::kernels

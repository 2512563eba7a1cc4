#include "kernels/kernels.h"

#include <cmath>
#include <initializer_list>
#include <string>

#include "kernels/cpu/cpu_kernels.h"
#if defined(LAYERSTREAM_HAVE_CUDA_BACKEND)
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/core/status_macros.h"
#endif

namespace layerstream::kernels {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

Status bad(const char* op, const std::string& what) { return Status::InvalidArgument(std::string(op) + ": " + what); }

struct NamedPointer {
  const char* name;
  const void* ptr;
};
struct NamedSize {
  const char* name;
  int64_t value;
};

// The checks every op starts with: its pointers are set and its sizes > 0.
Status check_fields(const char* op, std::initializer_list<NamedPointer> pointers,
                    std::initializer_list<NamedSize> sizes) {
  for (const NamedPointer& f : pointers) {
    if (!f.ptr) return bad(op, std::string(f.name) + " is null");
  }
  for (const NamedSize& f : sizes) {
    if (f.value <= 0) return bad(op, std::string(f.name) + " = " + num(f.value) + ", must be > 0");
  }
  return Status::OK();
}

// A supported type whose block divides n.
Status row_type(const char* op, const char* field, GgmlType type, int64_t n, const char* n_name) {
  const GgmlTypeTraits t = ggml_type_traits(type);
  if (!t.supported) return Status::Unsupported(std::string(op) + ": " + field + " type " + t.name + " is not supported");
  if (n % t.block_elems != 0) {
    return bad(op, std::string(n_name) + " = " + num(n) + " is not a multiple of the " + t.name + " block size " +
                       num(t.block_elems));
  }
  return Status::OK();
}

// silu_mul and gelu_mul: same fields, same rules.
template <GatedActivation kAct>
Status validate_gated(const GatedMulParams<kAct>& p) {
  const char* op = kAct == GatedActivation::kSilu ? "silu_mul" : "gelu_mul";
  return check_fields(op, {{"gate", p.gate}, {"up", p.up}, {"out", p.out}}, {{"n", p.n}});
}

}  // namespace

Status validate(const EmbeddingParams& p) {
  const char* op = "embedding";
  LS_RETURN_IF_ERROR(check_fields(op, {{"table", p.table}, {"tokens", p.tokens}, {"out", p.out}},
                                  {{"n_vocab", p.n_vocab}, {"n_embd", p.n_embd}, {"n_tokens", p.n_tokens}}));
  return row_type(op, "table", p.type, p.n_embd, "n_embd");
}

Status validate(const RmsNormParams& p) {
  const char* op = "rmsnorm";
  LS_RETURN_IF_ERROR(check_fields(op, {{"x", p.x}, {"weight", p.weight}, {"out", p.out}},
                                  {{"n_rows", p.n_rows}, {"n_cols", p.n_cols}}));
  if (!(p.eps >= 0)) return bad(op, "eps = " + std::to_string(p.eps) + ", must be >= 0");
  return Status::OK();
}

Status validate(const RopeParams& p) {
  const char* op = "rope";
  LS_RETURN_IF_ERROR(check_fields(op, {{"x", p.x}, {"positions", p.positions}},
                                  {{"n_tokens", p.n_tokens}, {"n_heads", p.n_heads}, {"head_dim", p.head_dim}}));
  const int64_t n_rot = p.n_rot == 0 ? p.head_dim : p.n_rot;
  if (n_rot < 0 || n_rot > p.head_dim || n_rot % 2 != 0) {
    return bad(op, "n_rot = " + num(p.n_rot) + ", must be even and in [0, head_dim = " + num(p.head_dim) + "]");
  }
  if (!(p.freq_base > 0)) return bad(op, "freq_base = " + std::to_string(p.freq_base) + ", must be > 0");
  if (!(p.freq_scale > 0)) return bad(op, "freq_scale = " + std::to_string(p.freq_scale) + ", must be > 0");
  if (!std::isfinite(p.attn_factor)) return bad(op, "attn_factor = " + std::to_string(p.attn_factor) + ", must be finite");
  if (p.ext_factor == 0) return Status::OK();
  if (!(p.ext_factor >= 0 && p.ext_factor <= 1)) {
    return bad(op, "ext_factor = " + std::to_string(p.ext_factor) + ", must be in [0, 1]");
  }
  if (p.n_ctx_orig <= 0) return bad(op, "n_ctx_orig = " + std::to_string(p.n_ctx_orig) + ", must be > 0 for YaRN");
  if (!(p.beta_fast > 0 && p.beta_slow > 0 && std::isfinite(p.beta_fast) && std::isfinite(p.beta_slow))) {
    return bad(op, "beta_fast = " + std::to_string(p.beta_fast) + ", beta_slow = " + std::to_string(p.beta_slow) +
                       ", must be positive and finite");
  }
  return Status::OK();
}

Status validate(const MatmulParams& p) {
  const char* op = "matmul";
  LS_RETURN_IF_ERROR(check_fields(op, {{"w", p.w}, {"x", p.x}, {"y", p.y}},
                                  {{"n_out", p.n_out}, {"n_in", p.n_in}, {"n_tokens", p.n_tokens}}));
  if (static_cast<const void*>(p.x) == static_cast<const void*>(p.y)) return bad(op, "y aliases x");
  return row_type(op, "w", p.w_type, p.n_in, "n_in");
}

Status validate(const AttentionParams& p) {
  const char* op = "attention";
  LS_RETURN_IF_ERROR(check_fields(op, {{"q", p.q}, {"k_cache", p.k_cache}, {"v_cache", p.v_cache}, {"out", p.out}},
                                  {{"n_tokens", p.n_tokens},
                                   {"n_head", p.n_head},
                                   {"n_kv_head", p.n_kv_head},
                                   {"head_dim", p.head_dim},
                                   {"n_ctx", p.n_ctx}}));
  if (p.kv_type != GgmlType::F32 && p.kv_type != GgmlType::F16) {
    return Status::Unsupported(std::string(op) + ": KV cache type " + ggml_type_traits(p.kv_type).name +
                               " is not supported (F32 or F16)");
  }
  if (p.head_dim > kMaxHeadDim) return bad(op, "head_dim = " + num(p.head_dim) + " exceeds " + num(kMaxHeadDim));
  if (p.n_head % p.n_kv_head != 0) {
    return bad(op, "n_head = " + num(p.n_head) + " is not a multiple of n_kv_head = " + num(p.n_kv_head));
  }
  if (p.start_pos < 0 || p.start_pos + p.n_tokens > p.n_ctx) {
    return bad(op, "positions [" + num(p.start_pos) + ", " + num(p.start_pos + p.n_tokens) +
                       ") do not fit the cache of n_ctx = " + num(p.n_ctx));
  }
  if (p.window < 0) return bad(op, "window = " + num(p.window) + ", must be >= 0 (0: no sliding window)");
  if (static_cast<const void*>(p.q) == static_cast<const void*>(p.out)) return bad(op, "out aliases q");
  return Status::OK();
}

Status validate(const SiluMulParams& p) { return validate_gated(p); }
Status validate(const GeluMulParams& p) { return validate_gated(p); }

Status validate(const ScaleParams& p) {
  const char* op = "scale";
  LS_RETURN_IF_ERROR(check_fields(op, {{"x", p.x}, {"out", p.out}}, {}));
  if (!std::isfinite(p.factor)) return bad(op, "factor = " + std::to_string(p.factor) + ", must be finite");
  return check_fields(op, {}, {{"n", p.n}});
}

Status validate(const AddParams& p) {
  return check_fields("add", {{"a", p.a}, {"b", p.b}, {"out", p.out}}, {{"n", p.n}});
}

Status validate(const SampleParams& p) {
  const char* op = "sample";
  LS_RETURN_IF_ERROR(check_fields(op, {{"logits", p.logits}, {"out_token", p.out_token}}, {{"n_vocab", p.n_vocab}}));
  if (p.n_vocab > INT32_MAX) return bad(op, "n_vocab = " + num(p.n_vocab) + " exceeds int32");
  if (!(p.top_p > 0)) return bad(op, "top_p = " + std::to_string(p.top_p) + ", must be > 0");
  if (std::isnan(p.temperature)) return bad(op, "temperature is NaN");
  return Status::OK();
}

Status validate(const MoeFfnParams& p) {
  const char* op = "moe_ffn";
  LS_RETURN_IF_ERROR(check_fields(
      op, {{"x", p.x}, {"router", p.router}, {"gate", p.gate}, {"up", p.up}, {"down", p.down}, {"out", p.out},
           {"work", p.work}},
      {{"n_tokens", p.n_tokens}, {"n_embd", p.n_embd}, {"n_ff", p.n_ff}, {"n_expert", p.n_expert},
       {"n_used", p.n_used}}));
  if (p.n_used > p.n_expert) return bad(op, "n_used = " + num(p.n_used) + " exceeds n_expert = " + num(p.n_expert));
  if (p.n_tokens * p.n_used > INT32_MAX) return bad(op, "n_tokens x n_used exceeds int32");
  if (static_cast<const void*>(p.x) == static_cast<const void*>(p.out)) return bad(op, "out aliases x");
  LS_RETURN_IF_ERROR(row_type(op, "router", p.router_type, p.n_embd, "n_embd"));
  LS_RETURN_IF_ERROR(row_type(op, "gate", p.gate_type, p.n_embd, "n_embd"));
  LS_RETURN_IF_ERROR(row_type(op, "up", p.up_type, p.n_embd, "n_embd"));
  LS_RETURN_IF_ERROR(row_type(op, "down", p.down_type, p.n_ff, "n_ff"));
  const uint64_t need = moe_work_bytes(p.n_tokens, p.n_embd, p.n_ff, p.n_expert, p.n_used);
  if (p.work_bytes < need) {
    return bad(op, "work_bytes = " + std::to_string(p.work_bytes) + " is below moe_work_bytes = " + std::to_string(need));
  }
  return Status::OK();
}

Result<std::unique_ptr<Kernels>> make_kernels(BackendKind backend, const KernelsOptions& options) {
  switch (backend) {
    case BackendKind::kHost:
      return std::unique_ptr<Kernels>(std::make_unique<CpuKernels>(options.host_threads, options.exact));
    case BackendKind::kCuda:
#if defined(LAYERSTREAM_HAVE_CUDA_BACKEND)
      return make_cuda_kernels();
#else
      return Status::Unsupported("cuda kernels: layerstream was built without CUDA (LAYERSTREAM_CUDA=OFF)");
#endif
    case BackendKind::kAuto: break;
  }
  return Status::InvalidArgument("make_kernels: backend 'auto' must be resolved to host or cuda first");
}

}  // namespace layerstream::kernels

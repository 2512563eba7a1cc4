#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <array>
#include <string>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/q4_1_packed.h"
#include "runtime/core/status_macros.h"

namespace layerstream::kernels {
namespace {

// Validates p, then enqueues op(p, pool) on the stream's host thread.
template <typename Params>
Status enqueue(const Params& p, ThreadPool* pool, Stream& stream, void (*op)(const Params&, ThreadPool*)) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool, op] {
    op(p, pool);
    return Status::OK();
  });
}

void fast_matmul(const MatmulParams& p, ThreadPool* pool) { cpu::matmul_fast(p, pool); }

}  // namespace

Status CpuKernels::embedding(const EmbeddingParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool()] { return cpu::embedding(p, pool); });
}

Status CpuKernels::rmsnorm(const RmsNormParams& p, Stream& s) { return enqueue(p, pool(), s, cpu::rmsnorm); }
Status CpuKernels::rope(const RopeParams& p, Stream& s) { return enqueue(p, pool(), s, cpu::rope); }
Status CpuKernels::matmul(const MatmulParams& p, Stream& stream) {
  return enqueue(p, pool(), stream, exact_ ? cpu::matmul : fast_matmul);
}
Status CpuKernels::attention(const AttentionParams& p, Stream& stream) {
  return enqueue(p, pool(), stream, cpu::attention);
}
Status CpuKernels::silu_mul(const SiluMulParams& p, Stream& s) { return enqueue(p, pool(), s, cpu::silu_mul); }
Status CpuKernels::gelu_mul(const GeluMulParams& p, Stream& s) { return enqueue(p, pool(), s, cpu::gelu_mul); }
Status CpuKernels::scale(const ScaleParams& p, Stream& s) { return enqueue(p, pool(), s, cpu::scale); }
Status CpuKernels::add(const AddParams& p, Stream& s) { return enqueue(p, pool(), s, cpu::add); }

Status CpuKernels::matmuls(const MatmulParams* ps, int n, Stream& stream) {
  if (n <= 0) return Status::OK();
  if (n > cpu::kMaxGroupedMatmuls || exact_) return Kernels::matmuls(ps, n, stream);
  for (int i = 0; i < n; ++i) {
    LS_RETURN_IF_ERROR(validate(ps[i]));
    if (ps[i].x != ps[0].x || ps[i].n_in != ps[0].n_in || ps[i].n_tokens != ps[0].n_tokens)
      return Status::InvalidArgument("matmuls: matmul " + std::to_string(i) +
                                     " does not share the first one's input (x, n_in and n_tokens must match)");
  }
  std::array<MatmulParams, cpu::kMaxGroupedMatmuls> group;
  std::copy(ps, ps + n, group.begin());
  return stream.host_func([group, n, pool = pool()] {
    cpu::matmul_fast_group(group.data(), n, pool);
    return Status::OK();
  });
}

Status CpuKernels::sample(const SampleParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p] {
    *p.out_token = cpu::sample(p.logits, p.n_vocab, p.temperature, p.top_k, p.top_p, p.seed);
    return Status::OK();
  });
}

Status CpuKernels::moe_ffn(const MoeFfnParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool(), exact = exact_] {
    cpu::moe_ffn(p, pool, exact);
    return Status::OK();
  });
}

uint64_t CpuKernels::packed_weight_bytes(GgmlType w_type, int64_t n_out, int64_t n_in) const {
  // The exact path never reads a packed copy; only Q4_1 has a layout (the
  // row-major kernels of the other types measured close to their bandwidth).
  if (exact_ || w_type != GgmlType::Q4_1 || !cpu::q4_1x16::available(n_out, n_in)) return 0;
  return ggml_row_bytes(ggml_type_traits(w_type), n_in) * static_cast<uint64_t>(n_out);
}

Status CpuKernels::pack_weight(const MatmulParams& p, void* out, Stream& stream) {
  if (packed_weight_bytes(p.w_type, p.n_out, p.n_in) == 0)
    return Status::InvalidArgument(std::string("pack_weight: no packed layout for ") + ggml_type_traits(p.w_type).name +
                                   " " + std::to_string(p.n_out) + "x" + std::to_string(p.n_in) +
                                   (exact_ ? " on the exact path" : "") +
                                   " (packed_weight_bytes says which have one: Q4_1 with AVX-512 VNNI)");
  if (!p.w || !out) return Status::InvalidArgument("pack_weight: null weight or output pointer");
  return stream.host_func([w = p.w, n_out = p.n_out, n_in = p.n_in, out] {
    cpu::q4_1x16::pack(w, n_out, n_in, out);
    return Status::OK();
  });
}

}  // namespace layerstream::kernels

#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <array>
#include <string>

#include "kernels/cpu/ops.h"

namespace layerstream::kernels {

Status CpuKernels::embedding(const EmbeddingParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool()] { return cpu::embedding(p, pool); });
}

Status CpuKernels::rmsnorm(const RmsNormParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool()] {
    cpu::rmsnorm(p, pool);
    return Status::OK();
  });
}

Status CpuKernels::rope(const RopeParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool()] {
    cpu::rope(p, pool);
    return Status::OK();
  });
}

Status CpuKernels::matmul(const MatmulParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool(), exact = exact_] {
    if (exact) {
      cpu::matmul(p, pool);
    } else {
      cpu::matmul_fast(p, pool);
    }
    return Status::OK();
  });
}

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

Status CpuKernels::attention(const AttentionParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool()] {
    cpu::attention(p, pool);
    return Status::OK();
  });
}

Status CpuKernels::silu_mul(const SiluMulParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool()] {
    cpu::silu_mul(p, pool);
    return Status::OK();
  });
}

Status CpuKernels::gelu_mul(const GeluMulParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool()] {
    cpu::gelu_mul(p, pool);
    return Status::OK();
  });
}

Status CpuKernels::scale(const ScaleParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool()] {
    cpu::scale(p, pool);
    return Status::OK();
  });
}

Status CpuKernels::add(const AddParams& p, Stream& stream) {
  LS_RETURN_IF_ERROR(validate(p));
  return stream.host_func([p, pool = pool()] {
    cpu::add(p, pool);
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

}  // namespace layerstream::kernels

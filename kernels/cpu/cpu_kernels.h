// CpuKernels: the host backend's Kernels. Each op validates its params and
// enqueues the matching kernels/cpu/ops.h function through stream.host_func;
// the function runs on the stream's host thread and spreads rows over this
// object's thread pool. The object must outlive the work it enqueued.
// matmul takes the fast path (qdot.h: int8 activations, integer dot
// products) unless `exact` asks for f32 activations throughout.
#pragma once

#include <memory>

#include "kernels/cpu/thread_pool.h"
#include "kernels/kernels.h"

namespace layerstream::kernels {

class CpuKernels final : public Kernels {
 public:
  explicit CpuKernels(int n_threads, bool exact = false)
      : pool_(std::make_unique<ThreadPool>(n_threads)), exact_(exact) {}
  BackendKind backend() const override { return BackendKind::kHost; }
  ThreadPool* pool() { return pool_.get(); }
  bool exact() const { return exact_; }

  Status embedding(const EmbeddingParams& p, Stream& stream) override;
  Status rmsnorm(const RmsNormParams& p, Stream& stream) override;
  Status rope(const RopeParams& p, Stream& stream) override;
  Status matmul(const MatmulParams& p, Stream& stream) override;
  Status matmuls(const MatmulParams* ps, int n, Stream& stream) override;
  Status attention(const AttentionParams& p, Stream& stream) override;
  Status silu_mul(const SiluMulParams& p, Stream& stream) override;
  Status gelu_mul(const GeluMulParams& p, Stream& stream) override;
  Status scale(const ScaleParams& p, Stream& stream) override;
  Status add(const AddParams& p, Stream& stream) override;
  Status sample(const SampleParams& p, Stream& stream) override;
  Status moe_ffn(const MoeFfnParams& p, Stream& stream) override;
  uint64_t packed_weight_bytes(GgmlType w_type, int64_t n_out, int64_t n_in) const override;
  Status pack_weight(const MatmulParams& p, void* out, Stream& stream) override;

 private:
  std::unique_ptr<ThreadPool> pool_;
  bool exact_ = false;
};

}  // namespace layerstream::kernels

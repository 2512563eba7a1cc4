// CudaKernels: the cuda backend's Kernels. Ops validate, then launch on the
// stream's cudaStream_t (Stream::native_handle()). Owns (RAII, no manual
// frees) a cuBLAS handle, a small device scratch for argmax results and pinned
// host scratch for sampling; sampling ops on one object must be enqueued on
// one stream.
#include <cstring>
#include <mutex>
#include <new>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launchers.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_owners.h"

namespace layerstream::kernels {
namespace {

using namespace cuda;  // NOLINT: .cu file, kernels' own namespace

// Host-function payload: samples from the pinned copy of the logits (or
// takes the argmax result) and writes the caller's out_token.
struct SampleJob {
  SampleParams p;
  const float* host_logits = nullptr;  // null for greedy
  const int32_t* host_argmax = nullptr;
};

void CUDART_CB run_sample_job(void* data) {
  auto* job = static_cast<SampleJob*>(data);
  if (job->host_logits) {
    *job->p.out_token = cpu::sample(job->host_logits, job->p.n_vocab, job->p.temperature, job->p.top_k,
                                    job->p.top_p, job->p.seed);
  } else {
    *job->p.out_token = *job->host_argmax;
  }
  delete job;
}

struct CublasDestroy {
  void operator()(cublasHandle_t h) const noexcept { cublasDestroy(h); }
};
using CublasHandle = std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDestroy>;

class CudaKernels final : public Kernels {
 public:
  CudaKernels(CublasHandle cublas, layerstream::cuda::DeviceBuffer argmax_device,
              layerstream::cuda::PinnedBuffer argmax_host)
      : cublas_(std::move(cublas)), argmax_device_(std::move(argmax_device)), argmax_host_(std::move(argmax_host)) {}

  BackendKind backend() const override { return BackendKind::kCuda; }

  Status embedding(const EmbeddingParams& p, Stream& stream) override { return launch(p, launch_embedding, stream); }
  Status rmsnorm(const RmsNormParams& p, Stream& stream) override { return launch(p, launch_rmsnorm, stream); }
  Status rope(const RopeParams& p, Stream& stream) override { return launch(p, launch_rope, stream); }
  Status matmul(const MatmulParams& p, Stream& stream) override {
    LS_RETURN_IF_ERROR(validate(p));
    return launch_matmul(p, cublas_.get(), handle(stream));
  }
  Status attention(const AttentionParams& p, Stream& stream) override { return launch(p, launch_attention, stream); }
  Status silu_mul(const SiluMulParams& p, Stream& stream) override { return launch(p, launch_silu_mul, stream); }
  Status gelu_mul(const GeluMulParams& p, Stream& stream) override { return launch(p, launch_gelu_mul, stream); }
  Status scale(const ScaleParams& p, Stream& stream) override { return launch(p, launch_scale, stream); }
  Status add(const AddParams& p, Stream& stream) override { return launch(p, launch_add, stream); }
  Status moe_ffn(const MoeFfnParams& p, Stream& stream) override {
    LS_RETURN_IF_ERROR(validate(p));
    return launch_moe_ffn(p, moe_host_, cublas_.get(), handle(stream));
  }
  uint64_t matmul_scratch_bytes(GgmlType w_type, int64_t n_out, int64_t n_in, int64_t n_tokens) const override {
    return cuda::matmul_scratch_bytes(w_type, n_out, n_in, n_tokens);
  }

  Status sample(const SampleParams& p, Stream& stream) override {
    LS_RETURN_IF_ERROR(validate(p));
    cudaStream_t s = handle(stream);
    auto* job = new (std::nothrow) SampleJob{p};
    if (!job) return Status::OutOfBudget("cuda sample: cannot allocate the host job");
    const Status st = enqueue_sample_input(p, s, *job);
    if (!st.ok()) {
      delete job;
      return st;
    }
    const cudaError_t err = cudaLaunchHostFunc(s, run_sample_job, job);
    if (err != cudaSuccess) {
      delete job;
      return cuda_error(err, "cudaLaunchHostFunc(sample)", __FILE__, __LINE__);
    }
    return Status::OK();
  }

 private:
  // Greedy: argmax on the device, result copied to pinned memory. Otherwise
  // the logits are copied to pinned memory for the CPU sampler.
  Status enqueue_sample_input(const SampleParams& p, cudaStream_t s, SampleJob& job) {
    if (p.temperature <= 0 || p.top_k == 1) {
      auto* dev = static_cast<int32_t*>(argmax_device_.get());
      auto* host = static_cast<int32_t*>(argmax_host_.get());
      LS_RETURN_IF_ERROR(launch_argmax(p.logits, p.n_vocab, dev, s));
      job.host_argmax = host;
      return copy(host, dev, sizeof(int32_t), s);
    }
    LS_RETURN_IF_ERROR(ensure_logits_capacity(p.n_vocab, s));
    job.host_logits = static_cast<const float*>(logits_host_.get());
    return copy(logits_host_.get(), p.logits, p.n_vocab * sizeof(float), s);
  }

  static cudaStream_t handle(Stream& stream) { return static_cast<cudaStream_t>(stream.native_handle()); }

  // Validates p, then launches the op on the stream.
  template <typename Params>
  static Status launch(const Params& p, Status (*launcher)(const Params&, cudaStream_t), Stream& stream) {
    LS_RETURN_IF_ERROR(validate(p));
    return launcher(p, handle(stream));
  }

  static Status copy(void* dst, const void* src, size_t bytes, cudaStream_t s) {
    LS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    return Status::OK();
  }

  // Grows the pinned logits buffer; the old one is freed only after the
  // stream drained (work already enqueued may still read it).
  Status ensure_logits_capacity(int64_t n, cudaStream_t s) {
    if (n <= logits_capacity_) return Status::OK();
    if (logits_host_) {
      LS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
      logits_host_.reset();
      logits_capacity_ = 0;
    }
    LS_ASSIGN_OR_RETURN(logits_host_, layerstream::cuda::pinned_alloc(n * sizeof(float), "cudaHostAlloc(logits)"));
    logits_capacity_ = n;
    return Status::OK();
  }

  CublasHandle cublas_;
  layerstream::cuda::DeviceBuffer argmax_device_;  // one int32_t
  layerstream::cuda::PinnedBuffer argmax_host_;    // one int32_t
  layerstream::cuda::PinnedBuffer logits_host_;    // logits_capacity_ floats
  int64_t logits_capacity_ = 0;
  MoeHostRouting moe_host_;  // moe_ffn's routing on the host
};

}  // namespace

Result<std::unique_ptr<Kernels>> make_cuda_kernels() {
  LS_RETURN_IF_ERROR(cuda_device_available());
  cublasHandle_t raw = nullptr;
  LS_CUBLAS_RETURN_IF_ERROR(cublasCreate(&raw));
  CublasHandle cublas(raw);
  LS_ASSIGN_OR_RETURN(auto dev, layerstream::cuda::device_alloc(256, "cudaMalloc(argmax scratch)"));
  LS_ASSIGN_OR_RETURN(auto host, layerstream::cuda::pinned_alloc(256, "cudaHostAlloc(argmax scratch)"));
  return std::unique_ptr<Kernels>(std::make_unique<CudaKernels>(std::move(cublas), std::move(dev), std::move(host)));
}

}  // namespace layerstream::kernels

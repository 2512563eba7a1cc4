// The CUDA mixture-of-experts FFN (kernels.h: MoeFfnParams). The router's
// logits are copied to the host, which routes (moe_router.h) and groups the
// tokens by expert as the CPU does; the lists go back to the device, then
// per chosen expert: its tokens' rows gathered, the existing matmul on its
// gate/up/down slices (plus the expert's biases where given), the rows added into out with their weights. The
// routing round trip synchronises the stream: a simple first path, not an
// overlapped one (a device-side router and grouped GEMM would avoid it).
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launchers.h"
#include "kernels/math/activation.h"
#include "kernels/math/moe_router.h"
#include "runtime/core/status_macros.h"

namespace layerstream::kernels::cuda {
namespace {

// out[j][:] = x[rows[j]][:] for j < n.
__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t n, int64_t width, float* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * width) return;
  const int64_t j = i / width, c = i % width;
  out[i] = x[rows[j] * width + c];
}

// out[rows[j]][:] += weights[j] * y[j][:]; an expert's rows are distinct tokens, so no two threads write one element.
__global__ void scatter_add_kernel(const float* y, const int32_t* rows, const float* weights, int64_t n, int64_t width,
                                   float* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * width) return;
  const int64_t j = i / width, c = i % width;
  out[rows[j] * width + c] += weights[j] * y[i];
}

// y[r][:] += bias[:] for n rows of `width`.
__global__ void add_row_bias_kernel(float* y, const float* bias, int64_t n, int64_t width) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n * width) y[i] += bias[i % width];
}

Status add_row_bias(float* y, const float* bias, int64_t n, int64_t width, cudaStream_t s) {
  if (!bias || n == 0) return Status::OK();
  add_row_bias_kernel<<<grid_for(n * width, 256), 256, 0, s>>>(y, bias, n, width);
  LS_CUDA_CHECK_LAUNCH("moe add_row_bias");
  return Status::OK();
}

__global__ void swiglu_oai_kernel(float* gate, const float* up, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) gate[i] = math::swiglu_oai(gate[i], up[i]);
}

// gate := act(gate, up) over n values.
Status gated_activation(const MoeFfnParams& p, float* gate, const float* up, int64_t n, cudaStream_t s) {
  switch (p.act) {
    case GatedActivation::kGelu: return launch_gelu_mul({gate, up, gate, n}, s);
    case GatedActivation::kSilu: return launch_silu_mul({gate, up, gate, n}, s);
    case GatedActivation::kSwigluOai:
      swiglu_oai_kernel<<<grid_for(n, 256), 256, 0, s>>>(gate, up, n);
      LS_CUDA_CHECK_LAUNCH("moe swiglu_oai");
      return Status::OK();
  }
  return Status::InvalidArgument("moe_ffn: unknown activation");
}

// The routing on the host, into the host copy `h` of the work buffer's routing arrays.
Status route_on_host(const MoeFfnParams& p, const MoeWork& dev, MoeHostRouting& h, cudaStream_t s) {
  const int64_t T = p.n_tokens, E = p.n_expert, K = p.n_used;
  h.logits.resize(T * E);
  h.ids.resize(T * K);
  h.weights.resize(T * K);
  h.expert_start.resize(E + 1);
  h.rows.resize(T * K);
  h.row_weights.resize(T * K);
  LS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h.logits.data(), dev.logits, T * E * sizeof(float), cudaMemcpyDeviceToHost, s));
  LS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  for (int64_t t = 0; t < T; ++t) {
    math::moe_route(h.logits.data() + t * E, static_cast<int>(E), static_cast<int>(K), h.ids.data() + t * K,
                    h.weights.data() + t * K);
  }
  MoeWork hw{};
  hw.ids = h.ids.data();
  hw.weights = h.weights.data();
  hw.expert_start = h.expert_start.data();
  hw.rows = h.rows.data();
  hw.row_weights = h.row_weights.data();
  moe_group_by_expert(hw, T, E, K);
  LS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev.rows, h.rows.data(), T * K * sizeof(int32_t), cudaMemcpyHostToDevice, s));
  LS_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dev.row_weights, h.row_weights.data(), T * K * sizeof(float), cudaMemcpyHostToDevice, s));
  // The host vectors are pageable and reused by the next call.
  LS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return Status::OK();
}

Status run_expert(const MoeFfnParams& p, const MoeWork& w, const MoeHostRouting& h, int64_t e, cublasHandle_t cublas,
                  cudaStream_t s) {
  const int32_t first = h.expert_start[e], n = h.expert_start[e + 1] - first;
  const int64_t ne = int64_t{n} * p.n_embd, nf = int64_t{n} * p.n_ff;
  gather_rows_kernel<<<grid_for(ne, 256), 256, 0, s>>>(p.x, w.rows + first, n, p.n_embd, w.xg);
  LS_CUDA_CHECK_LAUNCH("moe gather_rows");
  MatmulParams g = moe_expert_matmul(p.gate, p.gate_type, e, p.n_ff, p.n_embd, w.xg, w.gate, n);
  MatmulParams u = moe_expert_matmul(p.up, p.up_type, e, p.n_ff, p.n_embd, w.xg, w.up, n);
  MatmulParams d = moe_expert_matmul(p.down, p.down_type, e, p.n_embd, p.n_ff, w.gate, w.y, n);
  for (MatmulParams* m : {&g, &u, &d}) {
    m->scratch = p.scratch;
    m->scratch_bytes = p.scratch_bytes;
  }
  LS_RETURN_IF_ERROR(launch_matmul(g, cublas, s));
  LS_RETURN_IF_ERROR(launch_matmul(u, cublas, s));
  if (p.gate_bias) LS_RETURN_IF_ERROR(add_row_bias(w.gate, p.gate_bias + e * p.n_ff, n, p.n_ff, s));
  if (p.up_bias) LS_RETURN_IF_ERROR(add_row_bias(w.up, p.up_bias + e * p.n_ff, n, p.n_ff, s));
  LS_RETURN_IF_ERROR(gated_activation(p, w.gate, w.up, nf, s));
  LS_RETURN_IF_ERROR(launch_matmul(d, cublas, s));
  if (p.down_bias) LS_RETURN_IF_ERROR(add_row_bias(w.y, p.down_bias + e * p.n_embd, n, p.n_embd, s));
  scatter_add_kernel<<<grid_for(ne, 256), 256, 0, s>>>(w.y, w.rows + first, w.row_weights + first, n, p.n_embd, p.out);
  LS_CUDA_CHECK_LAUNCH("moe scatter_add");
  return Status::OK();
}

}  // namespace

Status launch_moe_ffn(const MoeFfnParams& p, MoeHostRouting& host, cublasHandle_t cublas, cudaStream_t s) {
  const MoeWork w = moe_work(p.work, p.n_tokens, p.n_embd, p.n_ff, p.n_expert, p.n_used);
  LS_RETURN_IF_ERROR(launch_matmul(moe_router_matmul(p, w.logits), cublas, s));
  LS_RETURN_IF_ERROR(add_row_bias(w.logits, p.router_bias, p.n_tokens, p.n_expert, s));
  LS_RETURN_IF_ERROR(route_on_host(p, w, host, s));
  LS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p.out, 0, p.n_tokens * p.n_embd * sizeof(float), s));
  for (int64_t e = 0; e < p.n_expert; ++e) {
    if (host.expert_start[e + 1] > host.expert_start[e]) LS_RETURN_IF_ERROR(run_expert(p, w, host, e, cublas, s));
  }
  return Status::OK();
}

}  // namespace layerstream::kernels::cuda

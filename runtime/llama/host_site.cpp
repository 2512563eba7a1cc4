// Hybrid execution: host-site blocks compute with the CPU kernels on a host
// mirror of the reserve layout (activations, their KV caches, rope_freqs).
// The executor calls the crossing hooks around a run of host-site layers
// (only x and the positions cross) and move_kv when a plan changes a block's
// site, so its KV cache follows it.
#include <cstring>

#include "runtime/core/status_macros.h"
#include "runtime/llama/runner_impl.h"

namespace layerstream::llama {

Status LlamaRunner::Impl::init_host_site(sched::ExecutorOptions& eo) {
  kernels::KernelsOptions ko;  // the runner's CPU kernel options (threads, exact) for the host site too
  ko.host_threads = opt.host_threads;
  ko.exact = opt.exact;
  LS_ASSIGN_OR_RETURN(hk, kernels::make_kernels(BackendKind::kHost, ko));
  LS_ASSIGN_OR_RETURN(host_res, dev.alloc_pinned(lay.total));
  std::memset(host_res.data(), 0, host_res.size());
  kv_site.assign(m.hparams.n_layers, sched::Site::kDevice);
  Impl* ip = this;
  eo.activations_to_host = [ip](Stream& s, int batch_tokens) -> Status {
    const uint64_t x_bytes = uint64_t(batch_tokens) * ip->m.hparams.n_embd * sizeof(float);
    LS_RETURN_IF_ERROR(s.copy_d2h(ip->host_base() + ip->lay.x, ip->base() + ip->lay.x, x_bytes));
    return s.copy_d2h(ip->host_base() + ip->lay.positions, ip->base() + ip->lay.positions,
                      uint64_t(batch_tokens) * sizeof(int32_t));
  };
  eo.activations_to_device = [ip](Stream& s, int batch_tokens) -> Status {
    const uint64_t x_bytes = uint64_t(batch_tokens) * ip->m.hparams.n_embd * sizeof(float);
    return s.copy_h2d(ip->base() + ip->lay.x, ip->host_base() + ip->lay.x, x_bytes);
  };
  eo.on_plan_change = [ip](const sched::Plan& from, const sched::Plan& to) { return ip->move_kv(from, to); };
  return Status::OK();
}

// Called by the executor with nothing in flight. Block b is executor layer b
// (the layers are the blocks in order, then the head). A block's KV cache is
// where its attention runs: on the host for a host-site block, on the device
// otherwise (a split block's attention is on the device).
Status LlamaRunner::Impl::move_kv(const sched::Plan& from, const sched::Plan& to) {
  auto kv_at = [&](size_t b) {
    return to.site(static_cast<int>(b)) == sched::Site::kHost ? sched::Site::kHost : sched::Site::kDevice;
  };
  if (from.tiers.empty()) {  // the first plan (executor creation): no KV yet
    for (size_t b = 0; b < kv_site.size(); ++b) kv_site[b] = kv_at(b);
    return Status::OK();
  }
  Stream& s = exec->compute_stream();
  for (size_t b = 0; b < kv_site.size(); ++b) {
    const sched::Site want = kv_at(b);
    if (want == kv_site[b]) continue;
    for (int seq = 0; seq < n_seq; ++seq)
      for (int which = 0; which < 2; ++which) {
        void* d = kv_plane_at(base(), seq, static_cast<int>(b), which);
        void* h = kv_plane_at(host_base(), seq, static_cast<int>(b), which);
        LS_RETURN_IF_ERROR(want == sched::Site::kHost ? s.copy_d2h(h, d, lay.kv_plane) : s.copy_h2d(d, h, lay.kv_plane));
      }
    kv_site[b] = want;
  }
  return s.synchronize();
}

}  // namespace layerstream::llama

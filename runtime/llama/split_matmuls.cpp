// Split blocks. Every matmul of a split block divides its output rows: the
// device computes rows [0, r) from the window region (the executor copied
// only those rows of each weight), the host lane rows [r, n) from the
// layer's RAM copy, at the same time; the halves join in the host mirror
// and the whole output goes back to the device, where the rest of the block
// (norms, RoPE, attention with its KV cache, activations) runs as usual.
// Matmuls that share an input (Q/K/V, gate/up) join once: four joins per
// block. Each join waits on this thread for the host lane (LayerRun's
// contract).
// Per-row arithmetic does not change with the row range (the same kernels,
// rows computed independently), so a split block computes what the block
// computes on either site.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime/core/status_macros.h"
#include "runtime/llama/runner_impl.h"

namespace layerstream::llama {

using sched::LayerRun;

namespace {

using Clock = std::chrono::steady_clock;

// The halves' times for the executor's cost model (LayerRun::split_timing):
// the host lane's busy time on its rows, the device's from x's arrival to
// its rows' arrival (events), and the join.
struct JoinClock {
  Clock::time_point h0;
  double host_s = 0, device_s = 0, join_s = 0;
};

int64_t out_rows(const GgufTensorInfo& t) { return static_cast<int64_t>(t.dims.size() > 1 ? t.dims[1] : 1); }

}  // namespace

// One matmul's two halves before the join.
struct LlamaRunner::Impl::SplitJoin {
  float* yh;     // the whole output in the host mirror [T][n]
  float* dpart;  // the device half, copied back [T][r]
  float* hpart;  // the host half [T][n - r]
  int64_t n, r;
};

std::vector<sched::SplitTensor> LlamaRunner::Impl::split_tensors(int b, int layer) const {
  std::vector<sched::SplitTensor> v;
  for (const GgufTensorInfo* t : m.blocks[b].matrices()) v.push_back({t->offset - span_begin[layer], t->n_bytes, out_rows(*t)});
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& c) { return a.offset < c.offset; });
  return v;
}

Status LlamaRunner::Impl::init_split() {
  const LlamaHparams& h = m.hparams;
  // The widest group of matmuls sharing an input: Q+K+V, gate+up, O, down.
  const uint64_t nq = uint64_t(h.n_head) * h.head_dim, nkv = uint64_t(h.n_head_kv) * h.head_dim;
  const uint64_t widest = std::max<uint64_t>({nq + 2 * nkv, 2 * uint64_t(h.n_ff), uint64_t(h.n_embd)});
  LS_ASSIGN_OR_RETURN(split_tmp, dev.alloc_pinned(uint64_t(t_max) * widest * sizeof(float)));
  LS_ASSIGN_OR_RETURN(split_x_ev, dev.create_event());
  LS_ASSIGN_OR_RETURN(split_y_ev, dev.create_event());
  return Status::OK();
}

// Enqueues one matmul's halves: rows [r, n) on the host lane H from the
// layer's host bytes (x already in the host mirror at xh), rows [0, r) on
// the device into y as [T][r], then copied to the host.
Status LlamaRunner::Impl::split_halves(const LayerRun& run, Stream& s, Stream& H, const float* x, float* xh, int T,
                                       const SplitOut& o, SplitJoin& j) {
  const GgufTensorInfo& t = *o.t;
  kernels::MatmulParams hp;
  hp.w = static_cast<const char*>(run.host_data) + (t.offset - span_begin[run.layer]) +
         uint64_t(j.r) * (t.n_bytes / static_cast<uint64_t>(j.n));
  hp.w_type = t.type;
  hp.n_in = static_cast<int64_t>(t.dims[0]);
  hp.n_out = j.n - j.r;
  hp.x = xh;
  hp.y = j.hpart;
  hp.n_tokens = T;
  if (lay.scratch_bytes) {
    hp.scratch = host_base() + lay.scratch;
    hp.scratch_bytes = lay.scratch_bytes;
  }
  if (j.n > j.r) LS_RETURN_IF_ERROR(hk->matmul(hp, H));
  if (j.r == 0) return Status::OK();
  kernels::MatmulParams dp = hp;
  dp.w = tensor(run, t);
  dp.n_out = j.r;
  dp.x = x;
  dp.y = o.y;
  dp.scratch = lay.scratch_bytes ? base() + lay.scratch : nullptr;
  LS_RETURN_IF_ERROR(k->matmul(dp, s));
  return s.copy_d2h(j.dpart, o.y, uint64_t(T) * j.r * sizeof(float));
}

// One join for a group of matmuls sharing the input x [T][n_in] (Q/K/V,
// gate/up, or one): x crosses to the host once, each matmul's halves run at
// the same time on both sides, and the outputs cross back once joined.
Status LlamaRunner::Impl::split_matmuls(const LayerRun& run, Stream& s, const float* x, int T,
                                        std::initializer_list<SplitOut> outs) {
  if (!run.host_lane || !run.host_data) return Status::Internal("split layer run without its host lane or bytes");
  Stream& H = *run.host_lane;
  auto host_of = [&](const void* d) { return host_base() + (static_cast<const char*>(d) - base()); };
  const int64_t n_in = static_cast<int64_t>(outs.begin()->t->dims[0]);
  float* xh = reinterpret_cast<float*>(host_of(x));  // the activations live at the same offsets in the host mirror
  LS_RETURN_IF_ERROR(s.copy_d2h(xh, x, uint64_t(T) * n_in * sizeof(float)));
  LS_RETURN_IF_ERROR(s.record(*split_x_ev));
  Event* x_ev = split_x_ev.get();
  LS_RETURN_IF_ERROR(H.host_func([x_ev] { return x_ev->synchronize(); }));
  // The host funcs run before the H.synchronize() below, so they may write
  // this frame's clock.
  JoinClock clk;
  JoinClock* cp = &clk;
  const bool timed = run.split_timing != nullptr;
  if (timed) LS_RETURN_IF_ERROR(H.host_func([cp] {
    cp->h0 = Clock::now();
    return Status::OK();
  }));
  std::vector<SplitJoin> joins;
  float* tmp = static_cast<float*>(split_tmp.data());
  for (const SplitOut& o : outs) {
    const int64_t n = out_rows(*o.t), r = sched::split_rows(n, run.device_rows);
    SplitJoin j{reinterpret_cast<float*>(host_of(o.y)), tmp, tmp + int64_t{T} * r, n, r};
    tmp += int64_t{T} * n;
    LS_RETURN_IF_ERROR(split_halves(run, s, H, x, xh, T, o, j));
    joins.push_back(j);
  }
  if (timed) LS_RETURN_IF_ERROR(H.host_func([cp] {
    cp->host_s = std::chrono::duration<double>(Clock::now() - cp->h0).count();
    return Status::OK();
  }));
  LS_RETURN_IF_ERROR(s.record(*split_y_ev));
  Event* y_ev = split_y_ev.get();
  LS_RETURN_IF_ERROR(H.host_func([y_ev, x_ev, joins, T, cp, timed] {
    LS_RETURN_IF_ERROR(y_ev->synchronize());
    const Clock::time_point j0 = Clock::now();
    if (timed) {
      LS_ASSIGN_OR_RETURN(const double ms, y_ev->elapsed_ms_since(*x_ev));
      cp->device_s = std::max(0.0, ms) * 1e-3;
    }
    for (const SplitJoin& j : joins)
      for (int tok = 0; tok < T; ++tok) {
        std::memcpy(j.yh + tok * j.n, j.dpart + tok * j.r, uint64_t(j.r) * sizeof(float));
        std::memcpy(j.yh + tok * j.n + j.r, j.hpart + tok * (j.n - j.r), uint64_t(j.n - j.r) * sizeof(float));
      }
    cp->join_s = std::chrono::duration<double>(Clock::now() - j0).count();
    return Status::OK();
  }));
  LS_RETURN_IF_ERROR(H.synchronize());  // the join
  if (timed) {
    // Both halves start when x arrives; the device waits for the longer
    // host half and then for the join before its next work.
    run.split_timing->host_s += clk.host_s;
    run.split_timing->device_idle_s += std::max(0.0, clk.host_s - clk.device_s) + clk.join_s;
  }
  for (const SplitOut& o : outs)
    LS_RETURN_IF_ERROR(s.copy_h2d(o.y, host_of(o.y), uint64_t(T) * out_rows(*o.t) * sizeof(float)));
  return Status::OK();
}

}  // namespace layerstream::llama

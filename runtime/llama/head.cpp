// The head: output_norm and output over the pass rows that asked for logits,
// in groups of the head buffers' rows (Layout::head_rows). Each group: its
// rows copied together (runs of consecutive rows as one copy), normed,
// multiplied, and its logits copied to the callers' host rows (runs of
// consecutive host rows as one copy). The stream is in order, so a group's
// copies finish before the next group overwrites the buffers.
#include <algorithm>

#include "runtime/core/status_macros.h"
#include "runtime/llama/runner_impl.h"

namespace layerstream::llama {

namespace {

// The length of the run of entries from `i` on (at most `end`) whose value
// steps by `step` from one to the next.
template <typename Get, typename T>
size_t run_length(size_t i, size_t end, Get get, T step) {
  size_t j = i + 1;
  while (j < end && get(j) == get(j - 1) + step) ++j;
  return j - i;
}

}  // namespace

Status LlamaRunner::Impl::head(const Pass& p, const sched::LayerRun& run, Stream& s) {
  const LlamaHparams& h = m.hparams;
  const int64_t e = h.n_embd, V = h.n_vocab;
  float *hrows = f(lay.hrows), *hl = f(lay.hlogits), *x = f(lay.x);
  const float* norm_w = m.output_tied ? f(lay.out_norm) : static_cast<const float*>(tensor(run, m.output_norm));
  const std::vector<LogitRow>& rows = p.rows;
  for (size_t first = 0; first < rows.size(); first += lay.head_rows) {
    const size_t end = std::min(rows.size(), first + lay.head_rows);
    const int R = static_cast<int>(end - first);
    for (size_t i = first; i < end;) {
      const size_t n = run_length(i, end, [&](size_t j) { return rows[j].row; }, 1);
      LS_RETURN_IF_ERROR(s.copy_d2d(hrows + int64_t(i - first) * e, x + int64_t(rows[i].row) * e, n * e * sizeof(float)));
      i += n;
    }
    kernels::RmsNormParams np{hrows, norm_w, hrows, R, e, h.rms_eps};
    LS_RETURN_IF_ERROR(k->rmsnorm(np, s));
    LS_RETURN_IF_ERROR(k->matmul(matmul_params(tensor(run, m.output), m.output, hrows, hl, R, base()), s));
    for (size_t i = first; i < end;) {
      const size_t n = run_length(i, end, [&](size_t j) { return rows[j].host; }, V);
      LS_RETURN_IF_ERROR(s.copy_d2h(rows[i].host, hl + int64_t(i - first) * V, n * V * sizeof(float)));
      i += n;
    }
  }
  return Status::OK();
}

}  // namespace layerstream::llama

// KV cache edits of the runner's sequence slots. The cache is positional:
// a sequence holds positions [0, position(seq)); a suffix can be forgotten,
// a whole cache copied to another slot.
#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/core/status_macros.h"
#include "runtime/llama/runner_impl.h"

namespace layerstream::llama {

Status LlamaRunner::copy_sequence(int src, int dst) {
  Impl& I = *impl_;
  if (src < 0 || src >= I.n_seq || dst < 0 || dst >= I.n_seq)
    return Status::InvalidArgument("copy_sequence: " + std::to_string(src) + " -> " + std::to_string(dst) +
                                   " outside [0, " + std::to_string(I.n_seq) + ")");
  if (src == dst) return Status::OK();
  const LlamaHparams& h = I.m.hparams;
  const uint64_t row_bytes = uint64_t{h.n_head_kv} * h.head_dim * (I.opt.kv_type == GgmlType::F16 ? 2 : 4);
  const uint64_t bytes = row_bytes * I.pos[src];
  Stream& s = I.exec->compute_stream();
  for (uint32_t layer = 0; layer < h.n_layers; ++layer)
    for (int which = 0; which < 2; ++which)
      LS_RETURN_IF_ERROR(s.copy_d2d(I.kv_plane_at(I.base(), dst, layer, which),
                                    I.kv_plane_at(I.base(), src, layer, which), bytes));
  LS_RETURN_IF_ERROR(s.synchronize());
  if (I.host_res.data())  // host-site blocks' KV caches
    for (uint32_t layer = 0; layer < h.n_layers; ++layer)
      for (int which = 0; which < 2; ++which)
        std::memcpy(I.kv_plane_at(I.host_base(), dst, layer, which), I.kv_plane_at(I.host_base(), src, layer, which),
                    bytes);
  I.pos[dst] = I.pos[src];
  return Status::OK();
}

Status LlamaRunner::truncate(int seq, int n_positions) {
  Impl& I = *impl_;
  if (seq < 0 || seq >= I.n_seq)
    return Status::InvalidArgument("sequence " + std::to_string(seq) + " is outside [0, " + std::to_string(I.n_seq) + ")");
  if (n_positions < 0) return Status::InvalidArgument("truncate: negative position " + std::to_string(n_positions));
  I.pos[seq] = std::min(I.pos[seq], n_positions);
  return Status::OK();
}

int LlamaRunner::position(int seq) const {
  LS_CHECK_MSG(seq >= 0 && seq < impl_->n_seq, "position: sequence " + std::to_string(seq) + " outside [0, " +
                                                   std::to_string(impl_->n_seq) + ")");
  return impl_->pos[seq];
}

Status LlamaRunner::reset(int seq) { return truncate(seq, 0); }
void LlamaRunner::reset_all() { std::fill(impl_->pos.begin(), impl_->pos.end(), 0); }

}  // namespace layerstream::llama

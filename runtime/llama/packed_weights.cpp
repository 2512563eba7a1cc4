#include "runtime/llama/packed_weights.h"

#include <algorithm>

#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/host/host_device.h"
#include "runtime/llama/runner_impl.h"

namespace layerstream::llama {

Status PackedWeights::apply(const GgufTensorInfo& t, kernels::Kernels& kern, Stream& s, kernels::MatmulParams& p) {
  const uint64_t bytes = kern.packed_weight_bytes(p.w_type, p.n_out, p.n_in);
  if (bytes == 0) return Status::OK();
  auto it = by_offset_.find(t.offset);
  if (it == by_offset_.end()) {
    if (bytes_ + bytes > cap_) {
      if (!capped_ && cap_ > 0) {
        LS_LOG_INFO("llama: no packed copy of {} and later tensors: {} packed already, the room is {} (the budget's "
                    "room beside the layers, at most half the available RAM); their one-token products read the "
                    "GGUF rows", t.name, format_bytes(bytes_), format_bytes(cap_));
        capped_ = true;
      }
      return Status::OK();
    }
    constexpr uint64_t kChunk = 32ull << 20, kAlign = 64, kHugePage = 2ull << 20;
    const uint64_t need = (bytes + kAlign - 1) / kAlign * kAlign;
    if (chunks_.empty() || chunk_used_ + need > chunks_.back().size()) {
      const size_t size = std::max<uint64_t>(kChunk, (need + kHugePage - 1) / kHugePage * kHugePage);
      auto chunk = host::alloc_pages(size);
      if (!chunk.ok()) return chunk.status().WithContext("no host memory for a packed copy of " + t.name);
      chunks_.push_back(std::move(*chunk));
      chunk_used_ = 0;
    }
    void* out = static_cast<char*>(chunks_.back().data()) + chunk_used_;
    LS_RETURN_IF_ERROR(kern.pack_weight(p, out, s));
    chunk_used_ += need;
    bytes_ += bytes;
    LS_LOG_DEBUG("llama: packed {} for one-token passes ({} B; {} B packed in all)", t.name, bytes, bytes_);
    it = by_offset_.emplace(t.offset, out).first;
  }
  p.w_packed = it->second;
  return Status::OK();
}

uint64_t packable_bytes(const LlamaModel& m, const kernels::Kernels& k) {
  uint64_t sum = 0;
  for (const ModelLayer& ml : m.layers) {
    if (ml.kind != LayerKind::kBlock) continue;
    for (const GgufTensorInfo* t : m.blocks[ml.block].matrices())
      if (t->dims.size() == 2)
        sum += k.packed_weight_bytes(t->type, static_cast<int64_t>(t->dims[1]), static_cast<int64_t>(t->dims[0]));
  }
  return sum;
}

// One-token passes over resident weights use a packed copy where one applies
// (not on a split site: its rows are divided).
Status LlamaRunner::Impl::use_packed(const sched::LayerRun& run, kernels::Kernels& kern, Stream& s,
                                     const GgufTensorInfo& t, kernels::MatmulParams& p) {
  if (p.n_tokens != 1 || run.tier != sched::Tier::kResident || run.site == sched::Site::kSplit) return Status::OK();
  return packed.apply(t, kern, s, p);
}

// The packed copies are made only when every layer is resident (a placement
// no re-plan grows), only as far as the budget has room beside the reserve
// and the layers, and never past half the host memory available
// (MemAvailable), so a model that barely fits in RAM runs without them
// (slower decode, same bits) rather than swapping. Made at load time (else
// the first one-token pass makes them: tens of ms that `run` would count in
// its first token).
Status LlamaRunner::Impl::pack_residents() {
  if (opt.external_weights) return Status::OK();  // read in place: no copies
  const sched::Plan& plan = exec->plan();
  if (plan.count(sched::Tier::kResident) != static_cast<int>(plan.tiers.size())) return Status::OK();
  uint64_t used = lay.total;
  for (uint64_t b : exec->layer_bytes()) used += sched::round_up(b, sched::kSlotAlignment);
  if (opt.vram_budget <= used) return Status::OK();
  packed.set_cap(std::min<uint64_t>(opt.vram_budget - used, host::available_ram() / 2));
  Stream& s = exec->compute_stream();
  for (size_t L = 0; L < layer_block.size(); ++L) {
    if (layer_block[L] < 0) continue;  // the head
    const void* view = exec->resident_host_view(static_cast<int>(L));
    if (!view) continue;  // device memory the host cannot read: the device's kernels
    sched::LayerRun run;
    run.layer = static_cast<int>(L);
    run.data = const_cast<void*>(view);
    run.tier = sched::Tier::kResident;
    for (const GgufTensorInfo* t : m.blocks[layer_block[L]].matrices()) {
      kernels::MatmulParams p = matmul_params(tensor(run, *t), *t, nullptr, nullptr, 1, base());
      LS_RETURN_IF_ERROR(use_packed(run, *k, s, *t, p));
    }
  }
  LS_RETURN_IF_ERROR(s.synchronize());
  if (packed.bytes()) LS_LOG_INFO("llama: packed {} of resident weights for one-token passes", format_bytes(packed.bytes()));
  return Status::OK();
}

}  // namespace layerstream::llama

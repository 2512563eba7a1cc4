// Packed copies (Kernels::pack_weight) of resident weights for one-token
// passes, by tensor file offset: a tensor's bytes are its file's, wherever
// they sit, so a copy stays right for the runner's life. Host memory inside
// a cap (the budget's room; the CPU kernels pack Q4_1 only, its own size
// again), in huge-page chunks like the host arena (the kernels stream
// through it).
//
// Thread safety: used by the thread that runs the runner's passes.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kernels/kernels.h"
#include "layerstream/status.h"
#include "runtime/device/device.h"
#include "runtime/model/llama_model.h"

namespace layerstream::llama {

class PackedWeights {
 public:
  // At most `cap` bytes of copies (0: none are made).
  void set_cap(uint64_t cap) { cap_ = cap; }
  uint64_t bytes() const { return bytes_; }

  // Sets p.w_packed from t's packed copy, making it first (enqueued on `s`,
  // in stream order after the weights are in place) when the kernels have a
  // packed layout for it and the cap has room; else leaves p as it is.
  Status apply(const GgufTensorInfo& t, kernels::Kernels& kern, Stream& s, kernels::MatmulParams& p);

 private:
  std::vector<HostBuffer> chunks_;
  uint64_t chunk_used_ = 0;
  std::unordered_map<uint64_t, void*> by_offset_;
  uint64_t cap_ = 0;
  uint64_t bytes_ = 0;
  bool capped_ = false;  // logged that the cap was reached
};

// The packed copies every block's weights would take (0 where the kernels
// have no packed layout): what the default budget adds on the host.
uint64_t packable_bytes(const LlamaModel& m, const kernels::Kernels& k);

}  // namespace layerstream::llama

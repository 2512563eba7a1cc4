// probe_block: the compute of one transformer block and of the head, timed
// by running the model's own forward pass (its kernels, its shapes and
// types, attention at a given context position, norms, RoPE) on the plan's
// backend. `layerstream plan` predicts per-layer compute from it instead of
// from matmul rates alone (issue 17: the matmuls alone were 22% optimistic
// on a compute-bound pass).
//
// How: the runner reads its weights in place (RunnerOptions::external_weights)
// from an anonymous mapping as large as the file in which only the probed
// block's span, the head's span and the small tensors (norms, RoPE factors)
// hold the file's bytes. The other blocks compute over the zero page (their
// times are not used), so the probe needs the memory of one block and the
// head, not of the model. Host backend only (host memory is what the host
// backend computes from); Unsupported on CUDA.
//
// Host backend, with `contention`: a RAM-tier copy on the host backend is a
// memcpy by the copy stream's thread on the cores and memory bandwidth the
// decode compute uses. The probe times the block's decode again while a
// memcpy runs in a loop beside it, and the memcpy alone, which gives the
// copy rate under compute and the compute time a copied byte takes away
// (CostModel::set_copy_contention).
#pragma once

#include <string>

#include "layerstream/status.h"
#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"

namespace layerstream::planning {

struct BlockProbeOptions {
  std::string path;
  llama::RunnerOptions runner;  // context, sequences, KV type, threads (placement options are ignored)
  DeviceOptions device;
  int decode_position = 0;      // each decode pass attends over this many cached positions
  int decode_passes = 5;        // timed passes (after one warm-up pass)
  int prefill_tokens = 32;      // one prefill pass of this many tokens; 0 = none
  bool contention = false;      // also measure copy/compute contention (host backend)
  uint64_t copy_buffer_bytes = 64ull << 20;  // memcpy source and destination, each (beyond the caches)
};

struct BlockTimes {
  int block_layer = -1;          // executor layer index of the probed block
  int head_layer = -1;           // executor layer index of the head
  int batch = 1;                 // decode tokens per pass (sequences)
  double block_decode_s = 0;     // median of the timed passes
  double head_decode_s = 0;
  int prefill_tokens = 0;
  double block_prefill_s = 0;
  double head_prefill_s = 0;
  // Contention (0 when not measured).
  double copy_gbps_alone = 0;       // memcpy rate with nothing else running (GB/s)
  double copy_gbps_contended = 0;   // memcpy rate while the block's decode runs
  double block_decode_contended_s = 0;
  double compute_s_per_copied_byte = 0;  // compute time lost per byte copied beside it
};

Result<BlockTimes> probe_block(const BlockProbeOptions& options);

}  // namespace layerstream::planning

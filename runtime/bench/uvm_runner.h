// The `uvm` bench strategy (CUDA only): the weights in CUDA managed memory,
// the alternative to planned streaming that users try first. The whole model
// file is read once into one cudaMallocManaged allocation (capped: the file
// plus the runner's arena must fit in the device's free memory, see
// cuda_managed.h), advised read-mostly with the CPU as preferred location, so
// the allocation is oversubscribed beyond the VRAM budget and the driver
// decides what stays on the device. A pass runs the same LlamaRunner layer
// computations, reading tensors in place (RunnerOptions::external_weights);
// before layer i computes, the compute stream waits for layer i's prefetch
// and layer i+1's cudaMemPrefetchAsync is issued on a separate stream, so it
// overlaps layer i's compute (after the last layer: the next pass's first).
// The executor holds only the KV cache, activations and one 4 KiB
// placeholder per layer, so its "bytes streamed" are 0: migrations are the
// driver's and are not counted.
#pragma once

#include <memory>
#include <string>

#include "layerstream/status.h"
#include "runtime/bench/bench_runner.h"
#include "runtime/bench/llama_bench.h"

namespace layerstream::bench {

// Creates the uvm runner on `device` (must be the cuda backend; Unsupported
// otherwise, and in builds without CUDA). `options` as for
// make_llama_bench_runner; its strategy is ignored.
Result<std::unique_ptr<BenchRunner>> make_uvm_bench_runner(Device& device, const std::string& path,
                                                           llama::RunnerOptions options, const LlamaWorkload& work);

// Why the uvm strategy cannot run on `info`'s backend ("" when it can).
std::string uvm_unavailable_reason(const DeviceInfo& info);

}  // namespace layerstream::bench

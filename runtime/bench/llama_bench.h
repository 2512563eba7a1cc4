// The bench workload on a Llama model: one BenchRunner per strategy over a
// llama::LlamaRunner. A pass is one prefill of `tokens` synthetic tokens on
// sequence 0 from position 0 (prefill mode), or one decode step of `batch`
// sequences (decode mode); either is exactly one executor pass.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "layerstream/status.h"
#include "runtime/bench/bench_runner.h"
#include "runtime/llama/llama_runner.h"

namespace layerstream::bench {

enum class BenchMode { kDecode, kPrefill };

struct LlamaWorkload {
  BenchMode mode = BenchMode::kDecode;
  int tokens = 1;   // prefill: tokens per pass; decode: batch (sequences per pass)
  // decode: every pass appends at this position (attention reads decode_pos
  // cached positions, whatever earlier passes left there); -1: positions
  // advance from 0 and wrap at the context length.
  int decode_pos = -1;
};

// The runner options a workload runs with: n_seq / prefill_chunk / n_ctx
// raised to what it needs (what make_llama_bench_runner uses; the box
// prediction sizes its footprint with the same).
llama::RunnerOptions workload_runner_options(llama::RunnerOptions options, const LlamaWorkload& work);

// One pass of the workload on `runner` (decode or prefill), as the bench runners step it.
std::function<Status()> workload_step(llama::LlamaRunner* runner, const LlamaWorkload& work);

// Creates the runner (device must outlive it). `options.strategy` selects the
// strategy; the workload sizes n_seq / prefill_chunk / n_ctx when they are 0.
Result<std::unique_ptr<BenchRunner>> make_llama_bench_runner(Device& device, const std::string& path,
                                                             llama::RunnerOptions options, const LlamaWorkload& work);

}  // namespace layerstream::bench

#include "runtime/bench/llama_bench.h"

#include <algorithm>

#include "runtime/bench/executor_runner.h"
#include "runtime/core/status_macros.h"

namespace layerstream::bench {

llama::RunnerOptions workload_runner_options(llama::RunnerOptions o, const LlamaWorkload& work) {
  if (work.mode == BenchMode::kDecode) {
    o.n_seq = std::max(o.n_seq, work.tokens);
    if (work.decode_pos >= 0) o.n_ctx = std::max(o.n_ctx, work.decode_pos + 1);
  } else {
    o.prefill_chunk = std::max(o.prefill_chunk, work.tokens);
    if (o.n_ctx == 0) o.n_ctx = work.tokens;
    o.n_ctx = std::max(o.n_ctx, work.tokens);
  }
  return o;
}

std::function<Status()> workload_step(llama::LlamaRunner* r, const LlamaWorkload& work) {
  if (work.mode == BenchMode::kDecode) return [r, b = work.tokens, at = work.decode_pos] { return r->bench_decode(b, at); };
  return [r, n = work.tokens] { return r->bench_prefill(n); };
}

Result<std::unique_ptr<BenchRunner>> make_llama_bench_runner(Device& device, const std::string& path,
                                                             llama::RunnerOptions o, const LlamaWorkload& work) {
  if (work.tokens < 1) return Status::InvalidArgument("bench: tokens per pass must be >= 1");
  o = workload_runner_options(std::move(o), work);
  LS_ASSIGN_OR_RETURN(auto runner, llama::LlamaRunner::create(device, path, o));
  std::shared_ptr<llama::LlamaRunner> owner(std::move(runner));
  std::vector<std::string> names = owner->executor().layer_names();
  llama::LlamaRunner* r = owner.get();
  return std::unique_ptr<BenchRunner>(
      new ExecutorRunner(owner, r->executor(), workload_step(r, work), std::move(names)));
}

}  // namespace layerstream::bench

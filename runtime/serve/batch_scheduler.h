// BatchScheduler: continuous batching over one Context of N sequences. A
// thread owns the context; a request takes a free sequence when one is free
// (else it waits in a bounded queue), and every pass decodes the next token
// of every active sequence together with the prompts of newly admitted ones,
// so the layers streamed for a pass serve all of them. A sequence is freed
// when its request ends or its client cancels it; its KV stays behind as a
// prefix-cache entry (PrefixCache), so a later request that begins with the
// same tokens prefills only the rest.
//
// Thread safety: submit, metrics, drain and the destructor may be called from
// any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "layerstream/context.h"
#include "layerstream/model.h"
#include "layerstream/status.h"
#include "runtime/serve/latency_histogram.h"
#include "runtime/serve/prefix_cache.h"
#include "runtime/serve/request.h"

namespace layerstream::serve {

struct SchedulerOptions {
  int parallel = 4;  // sequences decoded together
  int queue = 16;    // requests that may wait for a sequence; beyond that submit fails
  bool prefix_cache = true;  // reuse the KV of earlier requests' prefixes
  int cache_sequences = 0;   // sequences beyond `parallel` that only hold cached prefixes
  // The context takes parallel + cache_sequences sequences from the model's pool.
  int context_sequences() const { return parallel + cache_sequences; }
};

// Counters since start, for /metrics.
struct SchedulerMetrics {
  uint64_t requests_submitted = 0, requests_rejected = 0, requests_finished = 0, requests_cancelled = 0,
           requests_failed = 0;
  uint64_t finished_stop = 0, finished_length = 0;  // requests_finished by finish reason
  uint64_t prompt_tokens = 0, generated_tokens = 0;
  uint64_t prefill_tokens = 0;  // prompt tokens decoded (the rest came from the prefix cache)
  // Prefix cache, in tokens as vLLM counts them: prompt tokens looked up, and
  // of those, the ones whose KV was reused.
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;
  uint64_t passes = 0, streamed_bytes = 0;
  double pass_seconds = 0, efficiency_sum = 0;
  int active = 0, queued = 0, parallel = 0, sequences = 0, n_context = 0;
  // KV positions held by running requests and by cache entries, of
  // sequences * n_context.
  int64_t kv_busy_tokens = 0, kv_cached_tokens = 0;
  LatencyHistogram time_to_first_token = LatencyHistogram::time_to_first_token();
  LatencyHistogram inter_token_latency = LatencyHistogram::inter_token_latency();
};

class BatchScheduler {
 public:
  // `model` must have been opened with ModelOptions::sequences >=
  // options.context_sequences().
  static Result<std::unique_ptr<BatchScheduler>> create(std::shared_ptr<Model> model,
                                                        const SchedulerOptions& options);
  ~BatchScheduler();  // cancels what runs and waits for the thread

  // Queues `request`. InvalidArgument when the prompt is empty or does not
  // fit the context; OutOfBudget when every sequence is busy and the queue is
  // full; Cancelled after drain().
  Result<std::shared_ptr<RequestState>> submit(GenerationRequest request);
  // `n` choices of one request (OpenAI's n), admitted together: the prompt
  // is prefilled once and its KV copied to the others' sequences; choice i
  // samples with seed + i (each its own random seed when none is given).
  // InvalidArgument also when n is outside [1, parallel].
  Result<std::vector<std::shared_ptr<RequestState>>> submit_n(GenerationRequest request, int n);
  // Stops accepting, lets accepted requests (running and queued) finish (up
  // to `grace`, then cancels them) and returns when the scheduler is idle.
  void drain(std::chrono::milliseconds grace);
  SchedulerMetrics metrics() const;
  int n_context() const { return n_ctx_; }
  int queue_capacity() const { return options_.queue; }
  int parallel() const { return options_.parallel; }

 private:
  struct Slot;
  struct Queued {
    GenerationRequest request;
    std::vector<std::shared_ptr<RequestState>> states;  // one per choice
  };
  BatchScheduler(std::shared_ptr<Model> model, std::unique_ptr<Context> context,
                 const SchedulerOptions& options);
  void loop();
  bool admit();  // moves queued requests into free slots; false when stopping and idle
  void place(Slot& slot);  // picks the slot's sequence and what of the prompt it reuses
  // Takes free slots for every choice of `q`; false (nothing taken) when too few are free.
  bool admit_group(Queued& q);
  void add_prefill(Slot& slot, Batch& batch);
  void share_prompt(Slot& follower);  // copies the leader's prompt KV after its prefill
  void send_prompt_logprobs(Slot& slot, int first_index);
  Status apply_placement(Slot& slot);  // the KV edits of that choice
  struct Latency {
    bool first_token;  // time to first token, else time since the previous token
    double seconds;
  };
  void apply_placements();
  void pass();  // one decode over the active slots
  void sample_next(Slot& slot, std::vector<Latency>& latencies);
  Result<int32_t> draw(Slot& slot, std::span<const float> logits);
  void end(Slot& slot, FinishReason reason, Failure failure = Failure::kNone, std::string error = {});

  std::shared_ptr<Model> model_;
  std::unique_ptr<Context> ctx_;  // used by the loop thread only
  const SchedulerOptions options_;
  const int n_ctx_;
  std::vector<std::unique_ptr<Slot>> slots_;  // loop thread only
  PrefixCache cache_;                         // loop thread only
  std::vector<Slot*> to_place_;               // loop thread only: admitted, KV edits pending, in order

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;     // guarded by mu_
  bool stopping_ = false;        // guarded by mu_: no new requests
  bool cancel_running_ = false;  // guarded by mu_
  bool idle_ = true;             // guarded by mu_: no slot active
  SchedulerMetrics metrics_;     // guarded by mu_
  std::thread thread_;
};

}  // namespace layerstream::serve

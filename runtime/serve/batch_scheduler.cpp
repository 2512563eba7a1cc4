#include "runtime/serve/batch_scheduler.h"

#include <algorithm>
#include <span>

#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/text_stream.h"

namespace layerstream::serve {

// One request being served and the sequence of the context it runs on.
struct BatchScheduler::Slot {
  int seq = -1;
  bool active = false, prefilled = false;
  int reused = 0;  // prompt tokens whose KV came from the prefix cache
  PrefixCache::Placement placement;
  GenerationRequest request;
  std::shared_ptr<RequestState> state;
  std::unique_ptr<SamplerChain> sampler;
  std::unique_ptr<TokenConstraint> constraint;  // request.structured, made at the first sample
  std::unique_ptr<TextStream> text;
  std::vector<int32_t> generated;
  int32_t last = -1;     // the sampled token to decode next
  int batch_index = -1;  // its logits row in the current pass
  int prompt_index = -1;  // the batch index of its first prefilled prompt token
  // Choices after the first of an n > 1 request: the first choice's slot,
  // whose prompt KV this one copies after that prefill, and that choice's
  // request (the slot may serve another one by then).
  Slot* leader = nullptr;
  const RequestState* leader_state = nullptr;
  bool leader_prefills() const {
    return leader && leader->active && !leader->prefilled && leader->state.get() == leader_state;
  }
  RequestState::Clock::time_point last_token_at;  // inter-token latency
};

Result<std::unique_ptr<BatchScheduler>> BatchScheduler::create(std::shared_ptr<Model> model,
                                                               const SchedulerOptions& options) {
  if (options.parallel < 1) return Status::InvalidArgument("--parallel must be >= 1");
  if (options.queue < 0) return Status::InvalidArgument("--queue must be >= 0");
  if (options.cache_sequences < 0) return Status::InvalidArgument("--cache-sequences must be >= 0");
  ContextOptions co;
  co.sequences = options.context_sequences();
  auto ctx = model->create_context(co);
  if (!ctx.ok()) return ctx.status();
  return std::unique_ptr<BatchScheduler>(new BatchScheduler(std::move(model), std::move(*ctx), options));
}

BatchScheduler::BatchScheduler(std::shared_ptr<Model> model, std::unique_ptr<Context> context,
                               const SchedulerOptions& options)
    : model_(std::move(model)),
      ctx_(std::move(context)),
      options_(options),
      n_ctx_(ctx_->n_context()),
      cache_(ctx_->sequences(), options.prefix_cache) {
  for (int i = 0; i < options.parallel; ++i) slots_.push_back(std::make_unique<Slot>());
  metrics_.parallel = options.parallel;
  metrics_.sequences = ctx_->sequences();
  metrics_.n_context = n_ctx_;
  thread_ = std::thread([this] { loop(); });
}

BatchScheduler::~BatchScheduler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cancel_running_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::shared_ptr<RequestState>> BatchScheduler::submit(GenerationRequest request) {
  auto states = submit_n(std::move(request), 1);
  if (!states.ok()) return states.status();
  return states->front();
}

Result<std::vector<std::shared_ptr<RequestState>>> BatchScheduler::submit_n(GenerationRequest request, int choices) {
  if (choices < 1 || choices > options_.parallel)
    return Status::InvalidArgument("n is " + std::to_string(choices) + "; this server decodes at most " +
                                   std::to_string(options_.parallel) + " sequences together (--parallel)");
  const int n = static_cast<int>(request.prompt.size());
  if (n == 0) return Status::InvalidArgument("the prompt has no tokens");
  if (n >= n_ctx_)
    return Status::InvalidArgument("the prompt has " + std::to_string(n) + " tokens but the context holds " +
                                   std::to_string(n_ctx_) + " (shorten it, or start the server with --ctx " +
                                   std::to_string(n + std::max(1, request.max_tokens)) + ")");
  std::vector<std::shared_ptr<RequestState>> states;
  for (int i = 0; i < choices; ++i) states.push_back(std::make_shared<RequestState>(n));
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status::Cancelled("the server is shutting down");
    const int busy = metrics_.active;
    if (busy >= options_.parallel && static_cast<int>(queue_.size()) >= options_.queue) {
      ++metrics_.requests_rejected;
      return Status::OutOfBudget(
          "the server is busy: " + std::to_string(busy) + " of " + std::to_string(options_.parallel) +
          " sequences run and " + std::to_string(queue_.size()) + " requests wait (the queue holds " +
          std::to_string(options_.queue) + "; retry later, or raise --parallel or --queue)");
    }
    metrics_.requests_submitted += choices;
    metrics_.prompt_tokens += n;
    queue_.push_back({std::move(request), states});
    metrics_.queued = static_cast<int>(queue_.size());
  }
  cv_.notify_all();
  return states;
}

void BatchScheduler::drain(std::chrono::milliseconds grace) {
  std::unique_lock lock(mu_);
  stopping_ = true;
  cv_.notify_all();
  if (!cv_.wait_for(lock, grace, [&] { return idle_ && queue_.empty(); })) {
    cancel_running_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return idle_ && queue_.empty(); });
  }
}

SchedulerMetrics BatchScheduler::metrics() const {
  std::lock_guard lock(mu_);
  return metrics_;
}

void BatchScheduler::end(Slot& s, FinishReason reason, Failure failure, std::string error) {
  std::string rest;
  if (failure == Failure::kNone) rest = s.text->finish(model_->detokenize(s.generated));
  // Also when nothing is left to show: the count includes tokens of a stop string.
  s.state->append(rest, static_cast<int>(s.generated.size()));
  {  // counted before the client hears of the end: metrics never lag it
    std::lock_guard lock(mu_);
    --metrics_.active;
    if (failure == Failure::kCancelled)
      ++metrics_.requests_cancelled;
    else if (failure == Failure::kError)
      ++metrics_.requests_failed;
    else
      ++metrics_.requests_finished;
    if (reason == FinishReason::kEndOfGeneration || reason == FinishReason::kStopString)
      ++metrics_.finished_stop;
    if (reason == FinishReason::kLength || reason == FinishReason::kContextFull) ++metrics_.finished_length;
    // Its sequence keeps what it decoded: a prefix-cache entry from now on.
    cache_.release(s.seq);
    metrics_.kv_busy_tokens = cache_.busy_tokens();
    metrics_.kv_cached_tokens = cache_.cached_tokens();
  }
  s.state->finish(reason, failure, std::move(error));
  s.active = false;
  s.state.reset();
}

void BatchScheduler::place(Slot& s) {
  const std::vector<int32_t>& prompt = s.request.prompt;
  s.placement = cache_.place(prompt);
  // A later choice copies its leader's prompt; prompt logprobs need the
  // logits of every prompt token: both start from an empty sequence.
  if (s.leader || s.request.prompt_logprobs) {
    s.placement.source = -1;
    s.placement.reused = 0;
  }
  s.seq = s.placement.seq;
  s.reused = s.placement.reused;
  cache_.take(s.seq, std::span(prompt).first(static_cast<size_t>(s.reused)));
  s.state->set_cached_tokens(s.reused);
  to_place_.push_back(&s);
  metrics_.prefix_cache_queries += prompt.size();
  metrics_.prefix_cache_hits += s.reused;
}

Status BatchScheduler::apply_placement(Slot& s) {
  const PrefixCache::Placement& p = s.placement;
  if (p.source >= 0 && p.source != p.seq) LS_RETURN_IF_ERROR(ctx_->copy_sequence(p.source, p.seq));
  return ctx_->remove(p.seq, p.reused);
}

bool BatchScheduler::admit() {
  std::unique_lock lock(mu_);
  for (;;) {
    const bool any_active = metrics_.active > 0;
    if (stopping_) {
      // Accepted requests (running or queued) finish, unless the grace ran out.
      if (cancel_running_) {
        for (Queued& q : queue_) {
          for (auto& st : q.states)
            st->finish(FinishReason::kNone, Failure::kCancelled, "the server is shutting down");
          metrics_.requests_cancelled += q.states.size();
        }
        queue_.clear();
        metrics_.queued = 0;
        lock.unlock();
        for (auto& s : slots_)
          if (s->active) end(*s, FinishReason::kNone, Failure::kCancelled, "the server is shutting down");
        lock.lock();
      }
      if (metrics_.active == 0 && queue_.empty()) {
        idle_ = true;
        cv_.notify_all();
        return false;
      }
    }
    bool admitted = false;
    while (!queue_.empty()) {
      Queued& q = queue_.front();
      if (std::all_of(q.states.begin(), q.states.end(), [](auto& st) { return st->cancelled(); })) {
        for (auto& st : q.states) st->finish(FinishReason::kNone, Failure::kCancelled);
        metrics_.requests_cancelled += q.states.size();
        queue_.pop_front();
        continue;
      }
      if (!admit_group(q)) break;  // first come, first served: the rest wait too
      queue_.pop_front();
      admitted = true;
    }
    metrics_.queued = static_cast<int>(queue_.size());
    idle_ = metrics_.active == 0;
    if (idle_) cv_.notify_all();  // drain() waits for this
    if (any_active || admitted) return true;
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
  }
}

bool BatchScheduler::admit_group(Queued& q) {
  std::vector<Slot*> free;
  for (auto& s : slots_)
    if (!s->active) free.push_back(s.get());
  if (free.size() < q.states.size()) return false;
  Slot* leader = nullptr;
  for (size_t i = 0; i < q.states.size(); ++i) {
    Slot& s = *free[i];
    s.active = true;
    s.prefilled = false;
    s.request = q.request;
    if (s.request.sampling.seed != kRandomSeed) s.request.sampling.seed += i;
    s.state = q.states[i];
    s.sampler = std::make_unique<SamplerChain>(SamplerChain::from(s.request.sampling));
    s.constraint.reset();
    s.text = std::make_unique<TextStream>(s.request.stop);
    s.generated.clear();
    s.last = -1;
    s.leader = leader;
    s.leader_state = leader ? leader->state.get() : nullptr;
    place(s);
    ++metrics_.active;
    if (!leader) leader = &s;
  }
  return true;
}

// The KV edits of this round's admissions, in the order they were placed (a
// later placement may copy from a sequence an earlier one just filled).
void BatchScheduler::apply_placements() {
  for (Slot* sp : to_place_) {
    Slot& s = *sp;
    if (!s.active) continue;
    if (Status st = apply_placement(s); !st.ok()) {
      cache_.forget(s.seq);
      end(s, FinishReason::kNone, Failure::kError, st.message());
    }
  }
  to_place_.clear();
}

void BatchScheduler::pass() {
  apply_placements();
  Batch batch;
  std::vector<Slot*> in_pass, followers;
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (!s.active) continue;
    if (s.state->cancelled()) {  // the client went away: free its sequence
      end(s, FinishReason::kNone, Failure::kCancelled, "the client disconnected");
      continue;
    }
    if (!s.prefilled && s.leader_prefills()) {
      followers.push_back(&s);  // copies its leader's prompt after this pass
      continue;
    }
    if (!s.prefilled) {
      add_prefill(s, batch);
    } else {
      batch.add(s.last, ctx_->position(s.seq), s.seq, true);
    }
    s.batch_index = static_cast<int>(batch.size()) - 1;
    in_pass.push_back(&s);
  }
  if (batch.empty()) return;
  if (Status st = ctx_->decode(batch); !st.ok()) {
    LS_LOG_ERROR("serve: a pass of {} tokens failed: {}", batch.size(), st.ToString());
    for (Slot* s : in_pass) {
      cache_.forget(s->seq);  // what the failed pass left in the KV is unknown
      end(*s, FinishReason::kNone, Failure::kError, st.ToString());
    }
    return;
  }
  const DecodeTotals totals = ctx_->take_decode_totals();
  uint64_t prefilled = 0;
  for (Slot* s : in_pass) {
    if (s->prefilled) {
      cache_.extend(s->seq, std::span(&s->last, 1));
    } else {
      cache_.extend(s->seq, std::span(s->request.prompt).subspan(static_cast<size_t>(s->reused)));
      prefilled += s->request.prompt.size() - s->reused;
      if (s->request.prompt_logprobs) send_prompt_logprobs(*s, s->prompt_index);
    }
  }
  for (Slot* f : followers) {
    share_prompt(*f);
    if (f->active) in_pass.push_back(f);
  }
  std::vector<Latency> latencies;
  int sampled = 0;
  for (Slot* s : in_pass) {
    ++sampled;
    sample_next(*s, latencies);
  }
  std::lock_guard lock(mu_);
  metrics_.generated_tokens += sampled;
  metrics_.prefill_tokens += prefilled;
  metrics_.passes += totals.passes;
  metrics_.pass_seconds += totals.measured_s;
  metrics_.efficiency_sum += totals.efficiency_sum;
  metrics_.streamed_bytes += totals.streamed_bytes;
  for (const Latency& l : latencies)
    (l.first_token ? metrics_.time_to_first_token : metrics_.inter_token_latency).observe(l.seconds);
  metrics_.kv_busy_tokens = cache_.busy_tokens();
  metrics_.kv_cached_tokens = cache_.cached_tokens();
}

// The prompt after what the prefix cache held; with logits for every token
// when the request asks for the prompt's logprobs.
void BatchScheduler::add_prefill(Slot& s, Batch& batch) {
  const std::vector<int32_t> rest(s.request.prompt.begin() + s.reused, s.request.prompt.end());
  s.prompt_index = static_cast<int>(batch.size());
  batch.add_sequence(rest, s.reused, s.seq);
  if (s.request.prompt_logprobs) std::fill(batch.logits.begin() + s.prompt_index, batch.logits.end(), 1);
}

// Prompt token i's logprob comes from the logits of token i - 1 (the whole
// prompt was prefilled: place() reuses nothing for these requests).
void BatchScheduler::send_prompt_logprobs(Slot& s, int first_index) {
  std::vector<TokenLogprob> out;
  const std::vector<int32_t>& prompt = s.request.prompt;
  for (size_t i = 1; i < prompt.size(); ++i)
    out.push_back(token_logprob(ctx_->logits(first_index + static_cast<int>(i) - 1), prompt[i],
                                std::max(s.request.logprobs, 0)));
  s.state->set_prompt_logprobs(std::move(out));
}

// The leader's sequence now holds the prompt: copy it, and sample from the
// leader's logits row (the choice's own sampler and seed).
void BatchScheduler::share_prompt(Slot& f) {
  const Slot& leader = *f.leader;
  if (Status st = ctx_->copy_sequence(leader.seq, f.seq); !st.ok()) {
    cache_.forget(f.seq);
    end(f, FinishReason::kNone, Failure::kError, st.ToString());
    return;
  }
  cache_.extend(f.seq, f.request.prompt);
  f.batch_index = leader.batch_index;
  if (f.request.prompt_logprobs) send_prompt_logprobs(f, leader.prompt_index);
}

// The slot's next token from `logits`, masked by its constraint (made on
// the first draw; the model has it compiled since the request was checked),
// and accepted by its sampler and constraint.
Result<int32_t> BatchScheduler::draw(Slot& s, std::span<const float> logits) {
  if (s.request.structured.kind != StructuredOutput::Kind::kNone && !s.constraint) {
    LS_ASSIGN_OR_RETURN(s.constraint, model_->constrain(s.request.structured));
  }
  if (s.constraint) {
    LS_ASSIGN_OR_RETURN(logits, s.constraint->mask(logits));
  }
  const int32_t t = s.sampler->sample(logits);
  s.sampler->accept(t);
  if (s.constraint) LS_RETURN_IF_ERROR(s.constraint->accept(t));
  return t;
}

// Samples the slot's next token from this pass's logits, hands its text to
// the client and ends the request when it is done.
void BatchScheduler::sample_next(Slot& s, std::vector<Latency>& latencies) {
  const bool first = !s.prefilled;
  s.prefilled = true;
  if (s.request.max_tokens == 0) {  // asked for the prompt's logprobs only
    end(s, FinishReason::kLength);
    return;
  }
  const std::span<const float> logits = ctx_->logits(s.batch_index);
  Result<int32_t> drawn = draw(s, logits);
  if (!drawn.ok()) {
    end(s, FinishReason::kNone, Failure::kError, "structured output: " + drawn.status().message());
    return;
  }
  const int32_t t = *drawn;
  if (t < 0 || model_->is_end_of_generation(t)) {
    end(s, FinishReason::kEndOfGeneration);
    return;
  }
  const auto now = RequestState::Clock::now();
  latencies.push_back({first, std::chrono::duration<double>(now - (first ? s.state->created() : s.last_token_at))
                                  .count()});
  s.last_token_at = now;
  s.generated.push_back(t);
  s.last = t;
  const std::string piece = s.text->update(model_->detokenize(s.generated));
  if (s.request.logprobs >= 0) {
    const TokenLogprob lp = token_logprob(logits, t, s.request.logprobs);
    s.state->append(piece, static_cast<int>(s.generated.size()), &lp);
  } else if (!piece.empty()) {
    s.state->append(piece, static_cast<int>(s.generated.size()));
  }
  if (s.text->stopped())
    end(s, FinishReason::kStopString);
  else if (static_cast<int>(s.generated.size()) >= s.request.max_tokens)
    end(s, FinishReason::kLength);
  else if (ctx_->position(s.seq) >= n_ctx_)
    end(s, FinishReason::kContextFull);
}

void BatchScheduler::loop() {
  while (admit()) pass();
}

}  // namespace layerstream::serve

// Context::generate: feed what is new, then sample and decode one token per
// sequence per pass until each sequence stops (layerstream/context.h).
#include <algorithm>
#include <chrono>

#include "layerstream/model.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/context_impl.h"
#include "runtime/llama/prefix_reuse.h"
#include "runtime/llama/speculative_loop.h"
#include "runtime/llama/text_stream.h"
#include "runtime/scheduler/plan.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

Result<GenerateResult> Context::generate(const std::string& prompt, const GenerateOptions& o, const TokenCallback& cb) {
  if (prompt.empty()) return Status::InvalidArgument("the prompt is empty");
  // A prompt from position 0 (a new context, or a whole-sequence prompt) begins with BOS.
  const bool fresh = (position(0) == 0 && impl_->pending[0].empty()) || o.prompt_start != PromptStart::kContinue;
  return generate(impl_->model->tokenize(prompt, /*add_bos=*/fresh), o, cb);
}

namespace {

// The tokens each sequence needs decoded before sampling: what the last call
// sampled but did not feed, then the prompt.
std::vector<std::vector<int32_t>> new_tokens(const Context::Impl& c, const std::vector<int32_t>& prompt) {
  std::vector<std::vector<int32_t>> out(c.slots.size());
  for (size_t s = 0; s < out.size(); ++s) {
    out[s] = c.pending[s];
    out[s].insert(out[s].end(), prompt.begin(), prompt.end());
  }
  return out;
}

// PromptStart::kReusePrefix / kFresh: `prompt` is each sequence's whole
// text. Cuts every sequence back to the prefix of it that it keeps
// (prefix_reuse.h; nothing for kFresh, nor when every prompt token's logits
// are asked for) and returns what each must prefill; `cached` gets sequence
// 0's kept count. Its checks come before any change.
Result<std::vector<std::vector<int32_t>>> start_over(Context& ctx, Context::Impl& c, const std::vector<int32_t>& prompt,
                                                     const GenerateOptions& o, int& cached) {
  if (prompt.empty()) return Status::InvalidArgument("the prompt has no tokens");
  if (prompt.size() > static_cast<size_t>(ctx.n_context()))
    return Status::InvalidArgument("prompt of " + std::to_string(prompt.size()) + " tokens is longer than the context (" +
                                   std::to_string(ctx.n_context()) + " tokens; raise --ctx)");
  const bool reuse = o.prompt_start == PromptStart::kReusePrefix && !o.prompt_logprobs;
  std::vector<std::vector<int32_t>> feed(ctx.sequences());
  for (int s = 0; s < ctx.sequences(); ++s) {
    std::vector<int32_t>& held = c.held[s];
    held.resize(std::min<size_t>(held.size(), ctx.position(s)));
    const int keep = reuse ? llama::reusable_prefix(held, prompt) : 0;
    LS_RETURN_IF_ERROR(ctx.remove(s, keep));
    feed[s].assign(prompt.begin() + keep, prompt.end());
    if (s == 0) cached = keep;
  }
  return feed;
}

// The options that do not depend on the context.
Status check_options(const GenerateOptions& o, int n_vocab) {
  if (o.max_tokens < 0) return Status::InvalidArgument("max_tokens must be >= 0");
  LS_RETURN_IF_ERROR(validate_sampling(o.sampling, n_vocab));
  for (const std::string& s : o.stop)
    if (s.empty()) return Status::InvalidArgument("stop strings must not be empty");
  if (o.structured.kind != StructuredOutput::Kind::kNone && o.speculative.draft != nullptr)
    return Status::InvalidArgument(
        "structured output and speculative decoding cannot be combined (draft tokens are not checked against "
        "the constraint): drop one");
  if (o.logprobs < -1 || o.logprobs > n_vocab)
    return Status::InvalidArgument("logprobs is " + std::to_string(o.logprobs) + "; it must be in [-1, " +
                                   std::to_string(n_vocab) + "] (-1: none)");
  return Status::OK();
}

Status check_fits(Context& ctx, const std::vector<std::vector<int32_t>>& feed) {
  for (int s = 0; s < ctx.sequences(); ++s) {
    if (feed[s].empty())
      return Status::InvalidArgument("sequence " + std::to_string(s) + " has no tokens to continue from");
    const size_t at = ctx.position(s);
    if (at + feed[s].size() > static_cast<size_t>(ctx.n_context()))
      return Status::InvalidArgument("prompt of " + std::to_string(feed[s].size()) + " tokens at position " +
                                     std::to_string(at) + " is longer than the context (" +
                                     std::to_string(ctx.n_context()) + " tokens; raise --ctx)");
  }
  return Status::OK();
}


// One generate() call: per sequence its sampler, text decoder and whether
// it still generates; the steps, in order, are prefill(), then sample() and
// decode() until sample() finds nothing left, then stats().
class Generation {
 public:
  Generation(Context& ctx, Context::Impl& c, const GenerateOptions& o, const TokenCallback& cb)
      : ctx_(ctx), c_(c), opt_(o), cb_(cb), B_(ctx.sequences()) {
    res_.generated.assign(B_, {});
    res_.text.assign(B_, "");
    res_.vocab = c.m->info.vocab;
    res_.finish.assign(B_, o.max_tokens > 0 ? FinishReason::kNone : FinishReason::kLength);
    if (o.logprobs >= 0) res_.logprobs.assign(B_, {});
    for (int i = 0; i < B_; ++i) {
      SamplingOptions so = o.sampling;
      if (so.seed != kRandomSeed) so.seed += i;  // else each chain draws its own
      samplers_.push_back(SamplerChain::from(so));
      res_.seeds.push_back(samplers_.back().seed());
      decoders_.push_back(std::make_unique<TokenStreamDecoder>(*c.m->tokenizer));
      streams_.emplace_back(o.stop);
    }
    raw_.assign(B_, "");
    active_.assign(B_, o.max_tokens > 0);
    c.decode_sums = {};
  }

  // GenerateOptions::structured: compiled before anything is decoded, so a
  // bad constraint costs no pass.
  Status constrain() {
    if (opt_.structured.kind == StructuredOutput::Kind::kNone) return Status::OK();
    for (int s = 0; s < B_; ++s) {
      LS_ASSIGN_OR_RETURN(std::unique_ptr<TokenConstraint> one, c_.model->constrain(opt_.structured));
      constraints_.push_back(std::move(one));
    }
    return Status::OK();
  }
  // What stopped the loop early, if anything did (a constraint error).
  const Status& error() const { return error_; }

  // Decodes only what is new. When every sequence starts empty with the same
  // tokens they share them: decoded once, the KV cache copied to the others.
  Status prefill(const std::vector<std::vector<int32_t>>& feed) {
    const auto t0 = Clock::now();
    res_.prompt_tokens = feed[0];
    if (opt_.max_tokens > 0 || opt_.prompt_logprobs) {
      bool shared = B_ > 1;
      for (int s = 0; s < B_ && shared; ++s) shared = ctx_.position(s) == 0 && feed[s] == feed[0];
      Batch batch;
      for (int s = 0; s < (shared ? 1 : B_); ++s) {
        batch.add_sequence(feed[s], ctx_.position(s), s);
        // Sequence 0 comes first: its token i is batch token i.
        if (s == 0 && opt_.prompt_logprobs) std::fill(batch.logits.begin(), batch.logits.end(), 1);
      }
      LS_RETURN_IF_ERROR(c_.run(batch, /*timing=*/false));
      if (opt_.prompt_logprobs)
        for (size_t i = 1; i < feed[0].size(); ++i)
          res_.prompt_logprobs.push_back(
              token_logprob(ctx_.logits(static_cast<int>(i) - 1), feed[0][i], std::max(opt_.logprobs, 0)));
      for (int s = 1; shared && s < B_; ++s) LS_RETURN_IF_ERROR(ctx_.copy_sequence(0, s));
      for (auto& p : c_.pending) p.clear();
    }
    res_.stats.prefill_s = seconds_since(t0);
    res_.stats.prompt_tokens = static_cast<int>(feed[0].size());
    return Status::OK();
  }

  // Samples every active sequence from its latest logits, reports the
  // tokens, and returns those to decode next (empty: done). A token that
  // ends its sequence is kept pending: the next generate() feeds it first.
  Batch sample(int step) {
    Batch next;
    for (int s = 0; s < B_ && !stopped_; ++s) {
      if (!active_[s]) continue;
      const std::vector<float>& logits = c_.last_logits[s];
      if (s == 0 && opt_.keep_logits) res_.logits.insert(res_.logits.end(), logits.begin(), logits.end());
      const int32_t t = draw(s, logits);
      if (t < 0) break;
      if (opt_.logprobs >= 0) res_.logprobs[s].push_back(token_logprob(logits, t, opt_.logprobs));
      res_.generated[s].push_back(t);
      ++res_.stats.generated_tokens;
      if (step > 0) ++decode_tokens_;
      std::string piece;
      const FinishReason why = advance(s, t, piece);
      if (why != FinishReason::kNone) {
        active_[s] = false;
        res_.finish[s] = why;
        c_.pending[s] = {t};
      } else {
        next.add(t, ctx_.position(s), s, true);
      }
      res_.text[s] += piece;
      if (cb_ && !cb_(TokenEvent{s, t, piece,
                                 opt_.logprobs >= 0 ? std::optional(res_.logprobs[s].back()) : std::nullopt}))
        stopped_ = true;
    }
    if (stopped_) {  // sampled, not decoded: pending
      for (size_t i = 0; i < next.size(); ++i) c_.pending[next.sequences[i]] = {next.tokens[i]};
      next.clear();
      for (int s = 0; s < B_; ++s) {
        if (!active_[s]) continue;
        active_[s] = false;
        res_.finish[s] = FinishReason::kCallback;
        res_.text[s] += streams_[s].finish(raw_[s] + decoders_[s]->finish());
      }
    }
    return next;
  }

  // Sequence s's next token from `logits` (masked by the constraint, if
  // any), accepted by its sampler and constraint; -1 (error_ set, the loop
  // stopped) when the constraint fails.
  int32_t draw(int s, std::span<const float> logits) {
    if (!constraints_.empty()) {
      Result<std::span<const float>> masked = constraints_[s]->mask(logits);
      if (!masked.ok()) return fail(masked.status());
      logits = *masked;
    }
    const int32_t t = samplers_[s].sample(logits);
    samplers_[s].accept(t);
    if (!constraints_.empty()) {
      const Status st = constraints_[s]->accept(t);
      if (!st.ok()) return fail(st);
    }
    return t;
  }
  int32_t fail(Status st) {
    error_ = std::move(st);
    stopped_ = true;
    return -1;
  }

  // Adds sequence s's token `t` to its text; `piece` gets what may be shown
  // now. Returns why the sequence ends with it (kNone: it goes on).
  FinishReason advance(int s, int32_t t, std::string& piece) {
    // A complete constraint ends its sequence even without stop_at_eog.
    const bool eog =
        (opt_.stop_at_eog || (!constraints_.empty() && constraints_[s]->terminated())) && c_.m->tokenizer->is_eog(t);
    if (!eog) raw_[s] += decoders_[s]->push(t);
    piece = streams_[s].update(raw_[s]);
    if (streams_[s].stopped()) return FinishReason::kStopString;
    FinishReason why = FinishReason::kNone;
    if (eog)
      why = FinishReason::kEndOfGeneration;
    else if (static_cast<int>(res_.generated[s].size()) >= opt_.max_tokens)
      why = FinishReason::kLength;
    else if (ctx_.position(s) >= ctx_.n_context())
      why = FinishReason::kContextFull;
    if (why != FinishReason::kNone) {
      raw_[s] += decoders_[s]->finish();
      piece += streams_[s].finish(raw_[s]);
      if (streams_[s].stopped()) return FinishReason::kStopString;
    }
    return why;
  }

  Status decode(const Batch& next) {
    const auto d0 = Clock::now();
    LS_RETURN_IF_ERROR(c_.run(next, /*timing=*/true));
    res_.stats.decode_s += seconds_since(d0);
    return Status::OK();
  }

  // The figures of this call, and the model's placement.
  GenerateResult stats() {
    Stats& st = res_.stats;
    const Context::Impl::PassSums& ps = c_.decode_sums;
    {
      MutexLock lock(c_.m->pass_mu);
      llama::LlamaRunner& r = *c_.m->runner;
      const sched::Plan& plan = r.plan();
      st.plan = sched::describe_plan(plan, r.executor().layer_bytes());
      st.layers_resident = plan.count(sched::Tier::kResident);
      st.layers_ram = plan.count(sched::Tier::kRam);
      st.layers_disk = plan.count(sched::Tier::kDisk);
      st.vram_budget = r.options().vram_budget;
      st.ram_budget = r.options().ram_budget;
      st.kv_bytes = r.reserve().kv_bytes;
      st.replans = r.executor().replans();
      st.load_bytes = r.executor().load_bytes();
      if (!ps.passes) st.bytes_streamed_per_pass = r.streamed_bytes_per_pass();
    }
    st.backend = std::string(name_of(c_.m->device->info().backend));
    st.device = c_.m->device->info().name;
    st.batch = B_;
    st.model_bytes = c_.m->info.file_bytes;
    st.prefill_tokens_per_s = st.prefill_s > 0 ? double(st.prompt_tokens) * B_ / st.prefill_s : 0;
    st.decode_tokens_per_s = st.decode_s > 0 ? decode_tokens_ / st.decode_s : 0;
    if (ps.passes) {
      st.mean_decode_pass_ms = ps.measured_s / ps.passes * 1e3;
      st.mean_predicted_pass_ms = ps.predicted_s / ps.passes * 1e3;
      st.mean_lower_bound_ms = ps.lower_bound_s / ps.passes * 1e3;
      st.overlap_efficiency = ps.efficiency / ps.passes;
      st.bytes_streamed_per_pass = ps.streamed_bytes / ps.passes;
      st.bytes_streamed_per_token = decode_tokens_ ? double(ps.streamed_bytes) / decode_tokens_ : 0;
      st.disk_gbps = ps.disk_s > 0 ? ps.disk_bytes / ps.disk_s / 1e9 : 0;
    }
    return std::move(res_);
  }

 private:
  Context& ctx_;
  Context::Impl& c_;
  const GenerateOptions& opt_;
  const TokenCallback& cb_;
  const int B_;
  GenerateResult res_;
  std::vector<SamplerChain> samplers_;
  std::vector<std::unique_ptr<TokenStreamDecoder>> decoders_;
  std::vector<TextStream> streams_;  // per sequence: stop strings over raw_
  std::vector<std::string> raw_;     // per sequence: the decoded text, stops included
  std::vector<bool> active_;
  int decode_tokens_ = 0;  // generated tokens after each sequence's first
  bool stopped_ = false;   // the callback asked to stop, or error_
  std::vector<std::unique_ptr<TokenConstraint>> constraints_;  // per sequence: GenerateOptions::structured
  Status error_;
};

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEndOfGeneration:
      return "eog";
    case FinishReason::kStopString:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kContextFull:
      return "context_full";
    case FinishReason::kCallback:
      return "callback";
    case FinishReason::kNone:
      break;
  }
  return "none";
}

Result<GenerateResult> Context::generate(const std::vector<int32_t>& prompt, const GenerateOptions& o,
                                         const TokenCallback& cb) {
  const bool append = o.prompt_start == PromptStart::kContinue;
  if (append && prompt.empty() && impl_->pending[0].empty()) return Status::InvalidArgument("the prompt has no tokens");
  LS_RETURN_IF_ERROR(check_options(o, impl_->m->info.vocab));
  const bool speculate = o.speculative.draft != nullptr;
  if (speculate) LS_RETURN_IF_ERROR(speculative::check(*this, *impl_, o.speculative));
  int cached = 0;
  std::vector<std::vector<int32_t>> feed;
  if (append) {
    feed = new_tokens(*impl_, prompt);
  } else {
    LS_ASSIGN_OR_RETURN(feed, start_over(*this, *impl_, prompt, o, cached));
  }
  LS_RETURN_IF_ERROR(check_fits(*this, feed));
  Generation g(*this, *impl_, o, cb);
  LS_RETURN_IF_ERROR(g.constrain());
  LS_RETURN_IF_ERROR(g.prefill(feed));
  SpeculativeStats spec;
  if (speculate) {
    LS_ASSIGN_OR_RETURN(spec, speculative::generate(*this, *impl_, o.speculative, feed[0],
                                                    [&](int step) { return g.sample(step); },
                                                    [&](const Batch& b) { return g.decode(b); }));
  } else {
    for (int step = 0;; ++step) {
      const Batch next = g.sample(step);
      if (next.empty()) break;
      LS_RETURN_IF_ERROR(g.decode(next));
    }
    LS_RETURN_IF_ERROR(g.error());
  }
  GenerateResult result = g.stats();
  result.stats.cached_tokens = cached;
  if (speculate) speculative::add_to(result.stats, spec);
  return result;
}

}  // namespace layerstream

// Context::generate: feed what is new, then sample and decode one token per
// sequence per pass until each sequence stops (layerstream/context.h).
#include <chrono>

#include "layerstream/model.h"
#include "runtime/llama/context_impl.h"
#include "runtime/scheduler/plan.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One generate() call's state: per sequence its sampler, text decoder and
// whether it still generates.
struct Generation {
  const GenerateOptions& opt;
  GenerateResult res;
  std::vector<SamplerChain> samplers;
  std::vector<std::unique_ptr<TokenStreamDecoder>> decoders;
  std::vector<bool> active;
  int decode_tokens = 0;  // generated tokens after each sequence's first
  bool stopped = false;   // the callback asked to stop
};

}  // namespace

Result<GenerateResult> Context::generate(const std::string& prompt, const GenerateOptions& o, const TokenCallback& cb) {
  if (prompt.empty()) return Status::InvalidArgument("the prompt is empty");
  const bool fresh = position(0) == 0 && impl_->pending[0].empty();
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

Status check_fits(Context& ctx, const std::vector<std::vector<int32_t>>& feed, const GenerateOptions& o) {
  if (o.max_tokens < 0) return Status::InvalidArgument("max_tokens must be >= 0");
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

}  // namespace

Result<GenerateResult> Context::generate(const std::vector<int32_t>& prompt, const GenerateOptions& o,
                                         const TokenCallback& cb) {
  Impl& c = *impl_;
  const int B = sequences();
  if (prompt.empty() && c.pending[0].empty()) return Status::InvalidArgument("the prompt has no tokens");
  const std::vector<std::vector<int32_t>> feed = new_tokens(c, prompt);
  LS_RETURN_IF_ERROR(check_fits(*this, feed, o));

  Generation g{.opt = o};
  g.res.prompt_tokens = feed[0];
  g.res.generated.assign(B, {});
  g.res.text.assign(B, "");
  g.res.vocab = c.m->info.vocab;
  for (int i = 0; i < B; ++i) {
    SamplingOptions so = o.sampling;
    so.seed += i;
    g.samplers.push_back(SamplerChain::from(so));
    g.decoders.push_back(std::make_unique<TokenStreamDecoder>(*c.m->tokenizer));
  }
  g.active.assign(B, o.max_tokens > 0);
  c.decode_sums = {};
  Stats& st = g.res.stats;

  // Step 1, prefill: only what is new. When every sequence starts empty they
  // share the prompt: decode it once, copy the KV cache to the others.
  const auto t0 = Clock::now();
  if (o.max_tokens > 0) {
    bool shared = B > 1;
    for (int s = 0; s < B && shared; ++s) shared = position(s) == 0 && feed[s] == feed[0];
    Batch batch;
    for (int s = 0; s < (shared ? 1 : B); ++s) batch.add_sequence(feed[s], position(s), s);
    LS_RETURN_IF_ERROR(c.run(batch, /*timing=*/false));
    for (int s = 1; shared && s < B; ++s) LS_RETURN_IF_ERROR(copy_sequence(0, s));
    for (auto& p : c.pending) p.clear();
  }
  st.prefill_s = seconds_since(t0);
  st.prompt_tokens = static_cast<int>(feed[0].size());

  // Step 2, the token loop: sample every active sequence, then one pass
  // decodes the sampled tokens of those that go on.
  for (int step = 0; !g.stopped; ++step) {
    Batch next;
    for (int s = 0; s < B && !g.stopped; ++s) {
      if (!g.active[s]) continue;
      const std::vector<float>& logits = c.last_logits[s];
      if (s == 0 && o.keep_logits) g.res.logits.insert(g.res.logits.end(), logits.begin(), logits.end());
      const int32_t t = g.samplers[s].sample(logits);
      g.samplers[s].accept(t);
      g.res.generated[s].push_back(t);
      ++st.generated_tokens;
      if (step > 0) ++g.decode_tokens;
      const bool eog = o.stop_at_eog && c.m->tokenizer->is_eog(t);
      std::string piece = eog ? std::string() : g.decoders[s]->push(t);
      const int at = position(s);
      if (eog || static_cast<int>(g.res.generated[s].size()) >= o.max_tokens || at >= n_context()) {
        g.active[s] = false;
        piece += g.decoders[s]->finish();
        c.pending[s] = {t};  // the next generate() feeds it first
      } else {
        next.add(t, at, s, true);
      }
      g.res.text[s] += piece;
      if (cb && !cb(TokenEvent{s, t, piece})) g.stopped = true;
    }
    if (g.stopped || next.empty()) {
      for (size_t i = 0; i < next.size(); ++i) c.pending[next.sequences[i]] = {next.tokens[i]};
      break;
    }
    const auto d0 = Clock::now();
    LS_RETURN_IF_ERROR(c.run(next, /*timing=*/true));
    st.decode_s += seconds_since(d0);
  }

  // Step 3, the figures.
  const Impl::PassSums& ps = c.decode_sums;
  {
    MutexLock lock(c.m->pass_mu);
    llama::LlamaRunner& r = *c.m->runner;
    const sched::Plan& plan = r.plan();
    st.backend = std::string(backend_name(c.m->device->info().backend));
    st.device = c.m->device->info().name;
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
  st.batch = B;
  st.model_bytes = c.m->info.file_bytes;
  st.prefill_tokens_per_s = st.prefill_s > 0 ? double(st.prompt_tokens) * B / st.prefill_s : 0;
  st.decode_tokens_per_s = st.decode_s > 0 ? g.decode_tokens / st.decode_s : 0;
  if (ps.passes) {
    st.mean_decode_pass_ms = ps.measured_s / ps.passes * 1e3;
    st.mean_predicted_pass_ms = ps.predicted_s / ps.passes * 1e3;
    st.mean_lower_bound_ms = ps.lower_bound_s / ps.passes * 1e3;
    st.overlap_efficiency = ps.efficiency / ps.passes;
    st.bytes_streamed_per_pass = ps.streamed_bytes / ps.passes;
    st.bytes_streamed_per_token = g.decode_tokens ? double(ps.streamed_bytes) / g.decode_tokens : 0;
  }
  return std::move(g.res);
}

}  // namespace layerstream

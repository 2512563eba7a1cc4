// The public API (layerstream/layerstream.h) over LlamaRunner and the tokenizer.
#include <chrono>
#include <cstdio>

#include "layerstream/layerstream.h"
#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/model/example_model.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream {

struct Model::Impl {
  std::string path;
  ModelOptions opt;
  ModelInfo info;
  std::unique_ptr<Tokenizer> tok;
  llama::RunnerOptions ro;
  DeviceOptions dopt;
};

struct Session::Impl {
  std::shared_ptr<Model> model;
  Model::Impl* m = nullptr;
  std::unique_ptr<Device> dev;
  std::unique_ptr<llama::LlamaRunner> runner;
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const ModelInfo& Model::info() const { return impl_->info; }
const ModelOptions& Model::options() const { return impl_->opt; }

Result<std::shared_ptr<Model>> Model::open(const std::string& path, const ModelOptions& o) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->opt = o;
  LS_ASSIGN_OR_RETURN(GgufFile file, read_gguf_file(path));
  auto lm = load_llama_model(file);
  if (!lm.ok()) return lm.status().WithContext(path);
  auto vocab = read_tokenizer_vocab(file);
  if (!vocab.ok()) return vocab.status().WithContext(path);
  auto tok = Tokenizer::create(std::move(*vocab));
  if (!tok.ok()) return tok.status().WithContext(path);
  impl->tok = std::move(*tok);
  const LlamaHparams& h = lm->hparams;
  impl->info = {path, h.arch, file.file_size(), int(h.n_layers), int(h.n_embd), int(h.n_head), int(h.n_head_kv),
                int(h.n_vocab), int(h.n_ctx_train)};

  llama::RunnerOptions& ro = impl->ro;
  ro.vram_budget = o.vram_budget;
  ro.ram_budget = o.ram_budget;
  ro.n_ctx = o.context;
  ro.n_seq = o.batch;
  ro.prefill_chunk = o.prefill_chunk;
  ro.trace = o.trace;
  ro.host_threads = o.host_threads;
  ro.exact = o.exact;
  if (o.kv_type == "f32") ro.kv_type = GgmlType::F32;
  else if (o.kv_type == "f16") ro.kv_type = GgmlType::F16;
  else return Status::InvalidArgument("KV cache type '" + o.kv_type + "' is not f32 or f16");
  LS_ASSIGN_OR_RETURN(ro.strategy, llama::parse_strategy(o.strategy));
  LS_ASSIGN_OR_RETURN(ro.reader.path, io::parse_io_path(o.io));
  impl->dopt.backend = o.backend == Backend::kHost   ? BackendKind::kHost
                       : o.backend == Backend::kCuda ? BackendKind::kCuda
                                                     : BackendKind::kAuto;
  impl->dopt.sim_link_gbps = o.sim_link_gbps;
  impl->dopt.host_threads = o.host_threads;
  return std::make_shared<Model>(std::move(impl));
}

std::vector<int32_t> Model::tokenize(const std::string& text, bool add_bos) const {
  std::vector<int32_t> ids = impl_->tok->encode(text, false);
  if (add_bos && impl_->tok->bos()) ids.insert(ids.begin(), *impl_->tok->bos());
  return ids;
}

std::string Model::detokenize(const std::vector<int32_t>& tokens) const { return impl_->tok->decode(tokens); }

Result<std::unique_ptr<Session>> Model::create_session() {
  auto s = std::make_unique<Session::Impl>();
  s->model = shared_from_this();
  s->m = impl_.get();
  LS_ASSIGN_OR_RETURN(s->dev, open_device(impl_->dopt));
  LS_ASSIGN_OR_RETURN(s->runner, llama::LlamaRunner::create(*s->dev, impl_->path, impl_->ro));
  return std::make_unique<Session>(std::move(s));
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() {
  if (impl_) impl_->runner.reset();  // before the device
}

Status Session::write_trace(const std::string& path) const { return impl_->runner->trace().write_chrome_json(path); }

Result<GenerateResult> Session::generate(const std::string& prompt, const GenerateOptions& o,
                                         const TokenCallback& cb) {
  if (prompt.empty()) return Status::InvalidArgument("the prompt is empty");
  return generate(impl_->model->tokenize(prompt, true), o, cb);
}

namespace {
uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

Result<GenerateResult> Session::generate(const std::vector<int32_t>& prompt, const GenerateOptions& o,
                                         const TokenCallback& cb) {
  using clock = std::chrono::steady_clock;
  llama::LlamaRunner& r = *impl_->runner;
  const Tokenizer& tok = *impl_->m->tok;
  const int B = r.n_seq();
  if (prompt.empty()) return Status::InvalidArgument("the prompt has no tokens");
  if (static_cast<int>(prompt.size()) > r.n_ctx())
    return Status::InvalidArgument("prompt of " + std::to_string(prompt.size()) +
                                   " tokens is longer than the context (" + std::to_string(r.n_ctx()) +
                                   " tokens; raise --ctx)");
  if (o.max_tokens < 0) return Status::InvalidArgument("max_tokens must be >= 0");
  r.reset_all();

  GenerateResult res;
  res.prompt_tokens = prompt;
  res.generated.assign(B, {});
  res.text.assign(B, "");
  res.vocab = r.model().hparams.n_vocab;
  std::vector<std::unique_ptr<TokenStreamDecoder>> dec;
  for (int i = 0; i < B; ++i) dec.push_back(std::make_unique<TokenStreamDecoder>(tok));

  std::vector<int> seqs(B);
  std::vector<std::vector<int32_t>> prompts(B, prompt);
  for (int i = 0; i < B; ++i) seqs[i] = i;
  const auto t0 = clock::now();
  if (o.max_tokens > 0) LS_RETURN_IF_ERROR(r.prefill_many(seqs, prompts));
  const auto t1 = clock::now();
  Stats& st = res.stats;
  st.prefill_s = std::chrono::duration<double>(t1 - t0).count();

  llama::SampleOptions so{o.temperature, o.top_k, o.top_p};
  std::vector<bool> active(B, o.max_tokens > 0);
  int decode_passes = 0, decode_tokens = 0;
  double sum_meas = 0, sum_pred = 0, sum_lb = 0, sum_eff = 0;
  uint64_t sum_streamed = 0;
  bool stop = false;
  for (int step = 0; !stop; ++step) {
    std::vector<int> next_seqs;
    std::vector<int32_t> next_toks;
    for (int i = 0; i < B && !stop; ++i) {
      if (!active[i]) continue;
      if (i == 0 && o.keep_logits) {
        auto l = r.logits(0);
        res.logits.insert(res.logits.end(), l.begin(), l.end());
      }
      LS_ASSIGN_OR_RETURN(int32_t t, r.sample(i, so, mix_seed(o.seed + i, step)));
      res.generated[i].push_back(t);
      ++st.generated_tokens;
      if (step > 0) ++decode_tokens;
      const bool eog = o.stop_at_eog && tok.is_eog(t);
      std::string piece = eog ? std::string() : dec[i]->push(t);
      if (eog || static_cast<int>(res.generated[i].size()) >= o.max_tokens || r.position(i) >= r.n_ctx()) {
        active[i] = false;
        piece += dec[i]->finish();
      } else {
        next_seqs.push_back(i);
        next_toks.push_back(t);
      }
      res.text[i] += piece;
      if (cb && !cb(TokenEvent{i, t, piece})) stop = true;
    }
    if (stop || next_seqs.empty()) break;
    const auto d0 = clock::now();
    LS_RETURN_IF_ERROR(r.decode(next_seqs, next_toks));
    st.decode_s += std::chrono::duration<double>(clock::now() - d0).count();
    const sched::PassSummary& ps = r.last_summary();
    ++decode_passes;
    sum_meas += ps.measured_s;
    sum_pred += ps.predicted_s;
    sum_lb += ps.lower_bound_s;
    sum_eff += ps.overlap_efficiency;
    sum_streamed += ps.streamed_bytes;
  }

  const sched::Plan& plan = r.plan();
  st.backend = std::string(backend_name(impl_->dev->info().backend));
  st.device = impl_->dev->info().name;
  st.plan = sched::describe_plan(plan, r.executor().layer_bytes());
  st.prompt_tokens = static_cast<int>(prompt.size());
  st.batch = B;
  st.prefill_tokens_per_s = st.prefill_s > 0 ? double(prompt.size()) * B / st.prefill_s : 0;
  st.decode_tokens_per_s = st.decode_s > 0 ? decode_tokens / st.decode_s : 0;
  if (decode_passes) {
    st.mean_decode_pass_ms = sum_meas / decode_passes * 1e3;
    st.mean_predicted_pass_ms = sum_pred / decode_passes * 1e3;
    st.mean_lower_bound_ms = sum_lb / decode_passes * 1e3;
    st.overlap_efficiency = sum_eff / decode_passes;
    st.bytes_streamed_per_pass = sum_streamed / decode_passes;
    st.bytes_streamed_per_token = decode_tokens ? double(sum_streamed) / decode_tokens : 0;
  } else {
    st.bytes_streamed_per_pass = r.streamed_bytes_per_pass();
  }
  st.layers_resident = plan.count(sched::Tier::kResident);
  st.layers_ram = plan.count(sched::Tier::kRam);
  st.layers_disk = plan.count(sched::Tier::kDisk);
  st.model_bytes = impl_->m->info.file_bytes;
  st.vram_budget = r.options().vram_budget;
  st.ram_budget = r.options().ram_budget;
  st.kv_bytes = r.reserve().kv_bytes;
  st.replans = r.executor().replans();
  return res;
}

Status make_example_model(const std::string& path, const ExampleModelOptions& o) {
  auto type = parse_ggml_type(o.dtype);
  if (!type) return Status::InvalidArgument("unknown dtype '" + o.dtype + "'");
  ExampleModelSpec spec;
  if (o.target_bytes) {
    LS_ASSIGN_OR_RETURN(spec, example_spec_for_size(o.target_bytes, *type, o.seed));
  } else {
    spec.n_embd = 128;
    spec.n_ff = 352;
    spec.n_ctx = 512;
    spec.dtype = *type;
    spec.seed = o.seed;
  }
  ExampleWriteOptions wo;
  wo.fsync = false;
  return write_example_model(path, spec, wo);
}

std::string format_stats(const Stats& s) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "prefill: %d tokens x %d in %.3f s (%.1f tokens/s)\n"
                "generated %d tokens; decode %.3f s (%.2f tokens/s), pass %.2f ms (predicted %.2f ms, lower bound %.2f ms)\n"
                "overlap efficiency: %.0f%% (lower bound / measured)\n"
                "streamed: %s per token, %s per pass\n"
                "layers: %d resident, %d ram, %d disk (model %s, vram budget %s, ram budget %s, KV %s)\n",
                s.prompt_tokens, s.batch, s.prefill_s, s.prefill_tokens_per_s, s.generated_tokens, s.decode_s,
                s.decode_tokens_per_s, s.mean_decode_pass_ms, s.mean_predicted_pass_ms, s.mean_lower_bound_ms,
                s.overlap_efficiency * 100, format_bytes(uint64_t(s.bytes_streamed_per_token)).c_str(),
                format_bytes(s.bytes_streamed_per_pass).c_str(), s.layers_resident, s.layers_ram, s.layers_disk,
                format_bytes(s.model_bytes).c_str(), format_bytes(s.vram_budget).c_str(),
                format_bytes(s.ram_budget).c_str(), format_bytes(s.kv_bytes).c_str());
  return std::string(buf) + "plan: " + s.plan + " on " + s.device + " (" + s.backend + ")\n";
}

}  // namespace layerstream

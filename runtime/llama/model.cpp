// Model: opens a file once, loads its resident layers once, and lends KV
// sequences to contexts (layerstream/model.h).
#include <algorithm>
#include <atomic>

#include "layerstream/context.h"
#include "layerstream/units.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/context_impl.h"
#include "runtime/llama/model_impl.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/scheduler/plan.h"

namespace layerstream {

llama::RunnerOptions runner_options_for(const ModelOptions& o) {
  llama::RunnerOptions ro;
  ro.vram_budget = o.vram_budget;
  ro.ram_budget = o.ram_budget;
  ro.n_ctx = o.context;
  ro.n_seq = o.sequences;
  ro.prefill_chunk = o.prefill_chunk;
  ro.trace = o.trace;
  ro.host_threads = o.host_threads;
  ro.exact = o.exact;
  ro.kv_type = o.kv_type == KvType::kF16 ? GgmlType::F16 : GgmlType::F32;
  ro.strategy = o.strategy;  // llama::Strategy is the public enum
  ro.host_compute_factor = o.host_compute_factor;
  ro.reader.path = o.io;
  if (o.progress) {
    LoadProgress progress = o.progress;
    ro.load_progress = [progress](uint64_t done, uint64_t total) {
      return progress(total ? static_cast<float>(double(done) / double(total)) : 1.0f);
    };
  }
  return ro;
}

// Every key whose value is not an array, as text (strings as they are).
static std::vector<std::pair<std::string, std::string>> scalar_metadata(const GgufFile& file) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const GgufKeyValue& kv : file.metadata()) {
    if (kv.value.is_array()) continue;
    out.emplace_back(kv.key, kv.value.type() == GgufType::kString ? kv.value.as_string() : kv.value.to_string());
  }
  return out;
}

DeviceOptions device_options_for(const ModelOptions& o) {
  DeviceOptions d;
  d.backend = o.backend;
  d.sim_link_gbps = o.sim_link_gbps;
  d.host_threads = o.host_threads;
  d.copies_only = o.staging == Staging::kAlways;
  return d;
}

Result<std::vector<int>> Model::Impl::take_slots(int n) {
  MutexLock lock(slot_mu);
  std::vector<int> got;
  for (int i = 0; i < static_cast<int>(slot_used.size()) && static_cast<int>(got.size()) < n; ++i)
    if (!slot_used[i]) got.push_back(i);
  if (static_cast<int>(got.size()) < n)
    return Status::OutOfBudget("a context of " + std::to_string(n) + " sequences does not fit the model's KV pool: " +
                               std::to_string(got.size()) + " of " + std::to_string(slot_used.size()) +
                               " sequences are free (open the model with ModelOptions::sequences >= " +
                               std::to_string(slot_used.size() - got.size() + n) + ")");
  for (int s : got) slot_used[s] = true;
  return got;
}

void Model::Impl::give_back(const std::vector<int>& slots) {
  MutexLock lock(slot_mu);
  for (int s : slots) slot_used[s] = false;
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const ModelInfo& Model::info() const { return impl_->info; }
const ModelOptions& Model::options() const { return impl_->options; }
int Model::n_vocab() const { return impl_->info.vocab; }
int Model::n_context() const { return impl_->n_ctx; }
const std::vector<std::pair<std::string, std::string>>& Model::metadata() const { return impl_->metadata; }
bool Model::is_end_of_generation(int32_t token) const { return impl_->tokenizer->is_eog(token); }
int32_t Model::token_bos() const { return impl_->tokenizer->vocab().bos_id.value_or(-1); }
int32_t Model::token_eos() const { return impl_->tokenizer->vocab().eos_id.value_or(-1); }
int32_t Model::token_eot() const { return impl_->tokenizer->vocab().eot_id.value_or(-1); }
const std::string& Model::chat_template() const { return impl_->chat_template; }

Result<std::shared_ptr<Model>> Model::open(const std::string& path, const ModelOptions& o) {
  if (o.sequences < 1) return Status::InvalidArgument("sequences must be >= 1, got " + std::to_string(o.sequences));
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->options = o;
  // The file's metadata and tokenizer; the runner takes the parsed file.
  LS_ASSIGN_OR_RETURN(GgufFile file, read_gguf_file(path));
  {
    auto lm = load_llama_model(file);
    if (!lm.ok()) return lm.status().WithContext(path);
    auto vocab = read_tokenizer_vocab(file);
    if (!vocab.ok()) return vocab.status().WithContext(path);
    auto tok = Tokenizer::create(std::move(*vocab));
    if (!tok.ok()) return tok.status().WithContext(path);
    impl->tokenizer = std::move(*tok);
    auto chat_template = file.get_string_or("tokenizer.chat_template", "");
    if (!chat_template.ok()) return chat_template.status().WithContext(path);
    impl->chat_template = std::move(*chat_template);
    impl->metadata = scalar_metadata(file);
    const LlamaHparams& h = lm->hparams;
    impl->info = {path, h.arch, file.file_size(), int(h.n_layers), int(h.n_embd), int(h.n_head), int(h.n_head_kv),
                  int(h.n_vocab), int(h.n_ctx_train)};
  }
  // The device, the placement and the resident / RAM-tier loads.
  llama::RunnerOptions ro = runner_options_for(o);
  // The progress callback reports Model::open's loads only: re-plans between
  // passes later also load, on whatever thread decodes, and must not be
  // cancelled by a callback meant for loading (e.g. one that watches SIGINT).
  auto opening = std::make_shared<std::atomic<bool>>(true);
  if (ro.load_progress)
    ro.load_progress = [inner = std::move(ro.load_progress), opening](uint64_t done, uint64_t total) {
      return !opening->load() || inner(done, total);
    };
  LS_ASSIGN_OR_RETURN(impl->device, open_device(device_options_for(o)));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<llama::LlamaRunner> runner,
                      llama::LlamaRunner::create(*impl->device, path, std::move(file), ro));
  opening->store(false);
  impl->n_ctx = runner->n_ctx();
  impl->n_seq = runner->n_seq();
  {
    MutexLock lock(impl->pass_mu);
    impl->runner = std::move(runner);
  }
  {
    MutexLock lock(impl->slot_mu);
    impl->slot_used.assign(impl->n_seq, false);
  }
  return std::shared_ptr<Model>(new Model(std::move(impl)));  // the constructor is private
}

std::vector<int32_t> Model::tokenize(const std::string& text, bool add_special, bool parse_special) const {
  // BOS/EOS only where the file's tokenizer.ggml.add_bos_token/add_eos_token
  // ask; special tokens in the text parsed as llama.cpp does when asked.
  return impl_->tokenizer->encode(text, add_special, parse_special);
}

std::string Model::detokenize(const std::vector<int32_t>& tokens) const { return impl_->tokenizer->decode(tokens); }

Result<std::unique_ptr<Context>> Model::create_context(const ContextOptions& o) {
  if (o.sequences < 1)
    return Status::InvalidArgument("a context needs at least 1 sequence, got " + std::to_string(o.sequences));
  auto c = std::make_unique<Context::Impl>();
  c->model = shared_from_this();
  c->m = impl_.get();
  LS_ASSIGN_OR_RETURN(c->slots, impl_->take_slots(o.sequences));
  {  // A slot given back by another context may still hold its tokens.
    MutexLock lock(impl_->pass_mu);
    for (int s : c->slots) LS_RETURN_IF_ERROR(impl_->runner->reset(s));
  }
  c->pending.assign(o.sequences, {});
  c->last_logits.assign(o.sequences, {});
  c->held.assign(o.sequences, {});
  c->abort = o.abort_callback;
  return std::unique_ptr<Context>(new Context(std::move(c)));  // the constructor is private
}

int Model::free_sequences() const {
  MutexLock lock(impl_->slot_mu);
  return static_cast<int>(std::count(impl_->slot_used.begin(), impl_->slot_used.end(), false));
}

uint64_t Model::load_bytes() const {
  MutexLock lock(impl_->pass_mu);
  return impl_->runner->executor().load_bytes();
}

std::string Model::placement() const {
  MutexLock lock(impl_->pass_mu);
  return sched::describe_plan(impl_->runner->plan(), impl_->runner->executor().layer_bytes());
}

}  // namespace layerstream

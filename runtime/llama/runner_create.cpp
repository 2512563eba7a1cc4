// LlamaRunner::create and footprint: the model, the options, the reserve's
// layout, the layers, the budget check, host buffers, the executor (which
// loads residents and the RAM tier), then the small tensors kept in the
// reserve and the packed copies of resident weights.
#include <algorithm>
#include <cstring>

#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/runner_impl.h"
#include "runtime/llama/runner_layers.h"
#include "runtime/llama/runner_strategy.h"
#include "runtime/model/gguf_file.h"
#include "runtime/scheduler/planner.h"

namespace layerstream::llama {

using sched::LayerSpec;

LlamaRunner::LlamaRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaRunner::~LlamaRunner() = default;

Result<std::unique_ptr<LlamaRunner>> LlamaRunner::create(Device& device, const std::string& path,
                                                         RunnerOptions o) {
  LS_ASSIGN_OR_RETURN(GgufFile file, read_gguf_file(path));
  return create(device, path, std::move(file), std::move(o));
}

Result<std::unique_ptr<LlamaRunner>> LlamaRunner::create(Device& device, const std::string& path, GgufFile file,
                                                         RunnerOptions o) {
  auto impl = std::make_unique<Impl>(device);
  Impl& I = *impl;
  I.path = path;
  LS_RETURN_IF_ERROR(I.open_model(std::move(file)));
  LS_RETURN_IF_ERROR(check_runner_options(o));
  LS_RETURN_IF_ERROR(I.size_reserve(o, device.info().backend));
  LS_ASSIGN_OR_RETURN(std::vector<LayerSpec> layers, I.layer_specs(o));
  LS_RETURN_IF_ERROR(I.fit_budget(o, layers));
  I.opt = o;
  LS_RETURN_IF_ERROR(I.alloc_host_buffers());
  LS_RETURN_IF_ERROR(I.create_executor(std::move(layers)));
  LS_RETURN_IF_ERROR(I.load_reserve_tensors());
  LS_RETURN_IF_ERROR(I.pack_residents());
  LS_LOG_INFO("llama: {} layers (blocks and head; the embedding is gathered), ctx {} x {} seq, reserve {} (KV {}), plan: {}",
              I.exec->layer_bytes().size(), I.n_ctx, I.n_seq, format_bytes(I.lay.total), format_bytes(I.lay.kv_bytes),
              sched::describe_plan(I.exec->plan(), I.exec->layer_bytes()));
  return std::unique_ptr<LlamaRunner>(new LlamaRunner(std::move(impl)));
}

Status LlamaRunner::Impl::open_model(GgufFile f) {
  file = std::move(f);
  auto mm = load_llama_model(file);
  if (!mm.ok()) return mm.status().WithContext(path);
  m = std::move(*mm);
  return Status::OK();
}

// Context, sequences and tokens per pass; the kernels; the reserve's layout;
// the embedding's row size (checked against the tensor).
Status LlamaRunner::Impl::size_reserve(const RunnerOptions& o, BackendKind backend) {
  const LlamaHparams& h = m.hparams;
  n_ctx = context_for(h, o.n_ctx);
  n_seq = o.n_seq;
  t_max = pass_tokens_for(n_ctx, n_seq, o.prefill_chunk);
  pos.assign(n_seq, 0);
  kernels::KernelsOptions ko;
  ko.host_threads = o.host_threads;
  ko.exact = o.exact;
  LS_ASSIGN_OR_RETURN(k, kernels::make_kernels(backend, ko));
  lay = reserve_layout(m, n_ctx, n_seq, t_max, o.kv_type, *k, o.logits_all);
  emb_row_bytes = ggml_row_bytes(ggml_type_traits(m.token_embd.type), h.n_embd);
  if (emb_row_bytes * h.n_vocab != m.token_embd.n_bytes)
    return Status::Corruption(path + ": token_embd.weight holds " + std::to_string(m.token_embd.n_bytes) +
                              " bytes, not " + std::to_string(h.n_vocab) + " rows of " + std::to_string(emb_row_bytes));
  return Status::OK();
}

// runner_layers' list with what running needs: each layer's compute, the
// blocks' splittable tensors, the resident pins of kResident, and for
// external weights a resident placeholder per layer (the weights are read
// in place, tensor(); the executor's passes, events and trace stay as usual).
// Records span_begin, layer_block and head_layer.
Result<std::vector<LayerSpec>> LlamaRunner::Impl::layer_specs(const RunnerOptions& o) {
  LS_ASSIGN_OR_RETURN(RunnerLayers list, runner_layers(m, path, o));
  head_layer = list.head;
  layer_block = list.block;
  Impl* ip = this;
  for (size_t i = 0; i < list.specs.size(); ++i) {
    LayerSpec& spec = list.specs[i];
    const int b = list.block[i];
    span_begin.push_back(spec.file_offset);
    if (o.strategy == Strategy::kResident && !spec.pin) spec.pin = sched::Tier::kResident;
    if (o.external_weights) {
      static const uint8_t kPlaceholder[sched::kSlotAlignment] = {};
      spec.file.clear();
      spec.file_offset = 0;
      spec.host_data = kPlaceholder;
      spec.bytes = sizeof(kPlaceholder);
      spec.pin = sched::Tier::kResident;
    } else if (b >= 0) {
      spec.split_tensors = split_tensors(b, static_cast<int>(i));
    }
    spec.compute = [ip, b](const sched::LayerRun& r, Stream& s) -> Status {
      if (ip->opt.external_weights && ip->opt.external_weights->before_layer)
        LS_RETURN_IF_ERROR(ip->opt.external_weights->before_layer(r.layer, s));
      if (!ip->in_flight) return Status::Internal("llama: a layer ran outside a pass");
      return b >= 0 ? ip->block(*ip->in_flight, r, s, b) : ip->head(*ip->in_flight, r, s);
    };
  }
  return std::move(list.specs);
}

// Sets the default VRAM budget when none is given (everything resident on
// the host backend when it fits, else nine tenths of free memory) and checks
// the budget against the minimum before anything is allocated.
Status LlamaRunner::Impl::fit_budget(RunnerOptions& o, const std::vector<LayerSpec>& layers) const {
  const DeviceInfo& info = dev.info();
  if (o.vram_budget == 0) {
    uint64_t all_layers = 0;
    for (const LayerSpec& l : layers) all_layers += sched::round_up(l.bytes, sched::kSlotAlignment);
    // On the host, room for the packed copies of one-token passes too.
    const uint64_t want = lay.total + all_layers + packable_bytes(m, *k) + (64ull << 20);
    const uint64_t avail = info.free_memory_bytes / 10 * 9;
    o.vram_budget = info.backend == BackendKind::kHost ? std::min(want, avail) : avail;
    LS_LOG_INFO("llama: no VRAM budget given; using {} ({} free on {})", format_bytes(o.vram_budget),
                format_bytes(info.free_memory_bytes), info.name);
  }
  const bool disk_direct = sched::disk_reads_direct(info);  // the runner never forces staging
  if (o.vram_budget < min_vram_for(layers, lay.total, o, disk_direct))
    return budget_too_small(m, o, n_ctx, layers, disk_direct, lay, *k);
  return Status::OK();
}

// Pinned host buffers of a pass (tokens, positions, embedding rows, the
// bench helpers' logits).
Status LlamaRunner::Impl::alloc_host_buffers() {
  const uint64_t T = t_max, S = n_seq, V = m.hparams.n_vocab;
  LS_ASSIGN_OR_RETURN(tokens_host, dev.alloc_pinned(T * 4));
  LS_ASSIGN_OR_RETURN(pos_host, dev.alloc_pinned(T * 4));
  LS_ASSIGN_OR_RETURN(bench_logits_host, dev.alloc_pinned(S * V * 4));
  LS_ASSIGN_OR_RETURN(emb_rows_host, dev.alloc_pinned(T * emb_row_bytes));
  LS_ASSIGN_OR_RETURN(row_ids_host, dev.alloc_pinned(T * 4));
  for (uint64_t t = 0; t < T; ++t) static_cast<int32_t*>(row_ids_host.data())[t] = static_cast<int32_t>(t);
  return Status::OK();
}

Status LlamaRunner::Impl::create_executor(std::vector<LayerSpec> layers) {
  LS_ASSIGN_OR_RETURN(sched::ExecutorOptions eo, executor_options_for(opt, layers, dev.info(), lay.total));
  // Hybrid execution: blocks may run on the host site (the head stays on the
  // device); the host mirror and the crossing hooks exist before the first plan.
  // (runner_layers marked the blocks host_ok by the same rule, blocks_host_ok).
  if (sched::may_use_host_site(eo)) {
    LS_RETURN_IF_ERROR(init_host_site(eo));
    LS_RETURN_IF_ERROR(init_split());
  }
  auto ex = sched::Executor::create(dev, std::move(layers), std::move(eo));
  if (!ex.ok()) return ex.status().WithContext(path);
  exec = std::move(*ex);
  return Status::OK();
}

// Small tensors kept in the reserve, read once through an io::Reader with
// the runner's reader options (and so its fault injection): output_norm of a
// tied head (the head streams token_embd's span), rope_freqs (used by every
// block).
Status LlamaRunner::Impl::load_reserve_tensors() {
  if (!m.output_tied && !m.rope_freqs) return Status::OK();
  LS_ASSIGN_OR_RETURN(std::unique_ptr<io::Reader> rd, io::open_reader(path, opt.reader));
  auto read_into_reserve = [&](const GgufTensorInfo& t, uint64_t reserve_off, std::vector<float>& host) -> Status {
    host.resize(t.n_bytes / 4);
    LS_RETURN_IF_ERROR(rd->read_span(t.offset, t.n_bytes, host.data()).WithContext("read " + t.name));
    Stream& s = exec->compute_stream();
    LS_RETURN_IF_ERROR(s.copy_h2d(f(reserve_off), host.data(), t.n_bytes));
    if (host_res.data()) std::memcpy(host_base() + reserve_off, host.data(), t.n_bytes);
    return s.synchronize();
  };
  if (m.output_tied) LS_RETURN_IF_ERROR(read_into_reserve(m.output_norm, lay.out_norm, out_norm_host));
  if (m.rope_freqs) LS_RETURN_IF_ERROR(read_into_reserve(*m.rope_freqs, lay.rope_freqs, rope_freqs_host));
  return Status::OK();
}

uint64_t RunnerFootprint::Experts::bytes() const {
  uint64_t b = 0;
  for (const Matmul& m : one) b += m.bytes;
  return b;
}

Result<RunnerFootprint> LlamaRunner::footprint(const std::string& path, const RunnerOptions& o, BackendKind backend) {
  LS_ASSIGN_OR_RETURN(GgufFile file, read_gguf_file(path));
  return footprint(file, o, backend);
}

Result<RunnerFootprint> LlamaRunner::footprint(const GgufFile& file, const RunnerOptions& o, BackendKind backend) {
  const std::string& path = file.path();
  auto mm = load_llama_model(file);
  if (!mm.ok()) return mm.status().WithContext(path);
  const LlamaModel& m = *mm;
  if (o.n_seq < 1) return Status::InvalidArgument("number of sequences must be >= 1, got " + std::to_string(o.n_seq));
  if (o.prefill_chunk < 1)
    return Status::InvalidArgument("prefill chunk must be >= 1, got " + std::to_string(o.prefill_chunk));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<kernels::Kernels> k, kernels::make_kernels(backend));
  LS_ASSIGN_OR_RETURN(RunnerLayers list, runner_layers(m, path, o));
  RunnerFootprint f;
  f.n_ctx = context_for(m.hparams, o.n_ctx);
  f.n_seq = o.n_seq;
  f.max_pass_tokens = pass_tokens_for(f.n_ctx, f.n_seq, o.prefill_chunk);
  const Layout L = reserve_layout(m, f.n_ctx, f.n_seq, f.max_pass_tokens, o.kv_type, *k, o.logits_all);
  f.reserve = {L.kv_bytes, L.total - L.kv_bytes};
  f.head_layer = list.head;
  auto matmul = [](const GgufTensorInfo& t) {
    return RunnerFootprint::Matmul{t.type, int64_t(t.dims.size() > 1 ? t.dims[1] : 1), int64_t(t.dims[0]), t.n_bytes};
  };
  for (size_t i = 0; i < list.specs.size(); ++i) {
    list.specs[i].compute = [](const sched::LayerRun&, Stream&) { return Status::OK(); };
    std::vector<RunnerFootprint::Matmul> mats;
    RunnerFootprint::Experts experts;
    if (list.block[i] >= 0) {
      const LlamaBlock& b = m.blocks[list.block[i]];
      for (const GgufTensorInfo* t : b.matrices()) mats.push_back(matmul(*t));
      if (b.moe) {  // the router, and the experts a token uses: n_expert_used slices of each
        mats.push_back(matmul(b.moe->router));
        const uint32_t used = m.hparams.n_expert_used;
        experts = {m.hparams.n_expert, used, {}};
        for (const GgufTensorInfo* t : {&b.moe->gate_exps, &b.moe->up_exps, &b.moe->down_exps}) {
          mats.push_back({t->type, int64_t(t->dims[1]) * used, int64_t(t->dims[0]), expert_slice(*t, 0).bytes * used});
          experts.one.push_back({t->type, int64_t(t->dims[1]), int64_t(t->dims[0]), expert_slice(*t, 0).bytes});
        }
      }
    } else {
      mats.push_back(matmul(m.output));
    }
    f.matmuls.push_back(std::move(mats));
    f.experts.push_back(std::move(experts));
  }
  f.layers = std::move(list.specs);
  f.min_vram_budget = min_vram_for(f.layers, L.total, o, sched::disk_reads_direct(sched::device_info_for(backend)));
  return f;
}

}  // namespace layerstream::llama

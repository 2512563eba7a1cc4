// LlamaRunner's state and the functions each of its files defines (named in
// the comments). Internal to runtime/llama.
//
// Thread safety: one thread uses a runner (llama_runner.h); the host lane's
// functions of a split join run while that thread waits for them.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/reader.h"
#include "kernels/kernels.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/llama/packed_weights.h"
#include "runtime/llama/reserve_layout.h"

namespace layerstream::llama {

// A run of one sequence's tokens in a pass: appended at start_pos, in the
// pass's activation rows [row, row + n).
struct Segment {
  int seq = 0;
  int start_pos = 0;
  int n = 0;
  int row = 0;
};

// A pass row whose logits the head computes, copied to host memory at
// `host` (n_vocab floats).
struct LogitRow {
  int row = 0;
  float* host = nullptr;
};

// One executor pass, built by decode_tokens and read by the forward pass.
// The token ids and positions of its rows are in tokens_host / pos_host.
struct Pass {
  std::vector<Segment> segs;  // in row order
  std::vector<LogitRow> rows;
  int n_tokens = 0;
  void clear() {
    segs.clear();
    rows.clear();
    n_tokens = 0;
  }
};

struct LlamaRunner::Impl {
  Device& dev;
  RunnerOptions opt;
  GgufFile file;
  LlamaModel m;
  std::string path;
  std::unique_ptr<kernels::Kernels> k;
  std::unique_ptr<sched::Executor> exec;
  // Per executor layer: file offset of run.data, and the block it computes (-1: the head).
  std::vector<uint64_t> span_begin;
  std::vector<int> layer_block;
  int head_layer = -1;  // executor index of the head
  Layout lay;
  int n_ctx = 0, n_seq = 1, t_max = 1;
  std::vector<int> pos;                 // per sequence: tokens in its KV cache
  HostBuffer tokens_host, pos_host;     // the pass's token ids and positions [T]
  // Token embedding: never a streamed layer. Each pass gathers its tokens'
  // rows on the host (from the tied head's RAM copy or host-readable resident
  // region when there is one, else from the file) and sends them with the
  // activations; the device embeds them from that small table.
  HostBuffer emb_rows_host, row_ids_host;  // [T][emb_row_bytes], ids 0..T-1
  uint64_t emb_row_bytes = 0;
  std::unique_ptr<io::Reader> emb_reader;  // the file, for rows with no host copy (opened at first need)
  HostBuffer bench_logits_host;            // bench_*: the logits they ask for [n_seq][n_vocab]
  std::vector<float> out_norm_host;        // tied head: output_norm weights
  std::vector<float> rope_freqs_host;      // Llama 3.1 RoPE frequency factors
  PackedWeights packed;
  // decode_tokens's working memory, kept so a pass allocates nothing.
  struct Batch {
    std::vector<int> order;                // sequences in order of first appearance
    std::vector<std::vector<int>> of_seq;  // per sequence: its tokens (batch indices)
    std::vector<int> out_row;              // per token: its logits row, -1 for none
    std::vector<size_t> done;              // per sequence: tokens already in a pass
    Pass pass;
  } batch;
  // The pass the executor is running (set by run_pass for its duration): the
  // layers' compute callbacks and crossing hooks read it.
  const Pass* in_flight = nullptr;

  explicit Impl(Device& d) : dev(d) {}
  ~Impl() { exec.reset(); }

  char* base() const { return static_cast<char*>(exec->reserved().ptr); }
  float* f(uint64_t off) const { return reinterpret_cast<float*>(base() + off); }
  const void* tensor(const sched::LayerRun& run, const GgufTensorInfo& t) const {
    if (opt.external_weights) return opt.external_weights->base + t.offset;
    return static_cast<const char*>(run.data) + (t.offset - span_begin[run.layer]);
  }
  void* kv_plane_at(char* b, int seq, int layer, int which) const {
    const uint64_t idx = (static_cast<uint64_t>(seq) * m.hparams.n_layers + layer) * 2 + which;
    return b + lay.kv + idx * lay.kv_plane;
  }

  // create()'s steps, in order (runner_create.cpp).
  Status open_model(GgufFile file);
  Status size_reserve(const RunnerOptions& o, BackendKind backend);
  Result<std::vector<sched::LayerSpec>> layer_specs(const RunnerOptions& o);
  Status fit_budget(RunnerOptions& o, const std::vector<sched::LayerSpec>& layers) const;
  Status alloc_host_buffers();
  Status create_executor(std::vector<sched::LayerSpec> layers);
  Status load_reserve_tensors();

  // Batching (batching.cpp): checks a decode_tokens batch and groups it by
  // sequence; fills batch.pass with the next pass; runs one pass.
  Status group_batch(std::span<const PassToken> tokens, float* logits_out);
  void next_pass(std::span<const PassToken> tokens, float* logits_out, size_t& next_seq);
  Status run_pass(const Pass& p);

  // The token embedding (embedding.cpp).
  Status gather_embedding_rows(int n_tokens);
  Status read_embedding_rows(int n_tokens);
  Status embed(const Pass& p, Stream& s);

  // The forward pass (forward.cpp, head.cpp).
  Status block(const Pass& p, const sched::LayerRun& run, Stream& s, int b);
  Status attention(const Pass& p, const sched::LayerRun& run, Stream& s, int b);
  Status qkv(const Pass& p, const sched::LayerRun& run, Stream& s, int b);
  Status rope_qk(const Pass& p, const sched::LayerRun& run, Stream& s, int b);
  Status attend(const Pass& p, const sched::LayerRun& run, Stream& s, int b);
  Status ffn(const Pass& p, const sched::LayerRun& run, Stream& s, int b);
  Status moe_ffn(const Pass& p, const sched::LayerRun& run, Stream& s, int b);
  Status post_norm(const Pass& p, const sched::LayerRun& run, Stream& s, const std::optional<GgufTensorInfo>& norm);
  Status head(const Pass& p, const sched::LayerRun& run, Stream& s);
  // One matmul of a block's pass: split by rows on a split site, else with
  // the weight's packed copy where one applies (use_packed).
  Status block_matmul(const sched::LayerRun& run, Stream& s, const GgufTensorInfo& t, const float* x, float* y,
                      int n_tokens);
  // RunnerOptions::matmul_inputs for a group of matmuls sharing x (forward.cpp).
  Status observe_inputs(const sched::LayerRun& run, Stream& s, const float* x, int n_tokens,
                        std::initializer_list<const GgufTensorInfo*> weights);
  kernels::MatmulParams matmul_params(const void* w, const GgufTensorInfo& t, const float* x, float* y, int n_tokens,
                                      char* b) const;

  // Packed weights (packed_weights.cpp): sets p.w_packed from t's packed
  // copy when this pass can use one (one token, resident weights, not
  // split), enqueueing the packing on s the first time; the resident
  // blocks' copies made at load time.
  Status use_packed(const sched::LayerRun& run, kernels::Kernels& kern, Stream& s, const GgufTensorInfo& t,
                    kernels::MatmulParams& p);
  Status pack_residents();

  // The host site (host_site.cpp): host-site blocks compute with the CPU
  // kernels on a host mirror of the reserve layout (activations, their KV
  // caches, rope_freqs).
  HostBuffer host_res;
  std::unique_ptr<kernels::Kernels> hk;
  std::vector<sched::Site> kv_site;  // per block: where its KV cache is
  Status init_host_site(sched::ExecutorOptions& eo);
  Status move_kv(const sched::Plan& from, const sched::Plan& to);
  char* host_base() const { return static_cast<char*>(host_res.data()); }
  char* site_base(sched::Site s) const { return s == sched::Site::kHost ? host_base() : base(); }
  kernels::Kernels& site_kernels(sched::Site s) const { return s == sched::Site::kHost ? *hk : *k; }
  // Where a block's pass runs: its site's reserve (the device's, or the host
  // mirror) and kernels.
  struct SiteView {
    char* base;
    kernels::Kernels& k;
    float* f(uint64_t off) const { return reinterpret_cast<float*>(base + off); }
  };
  SiteView site_view(sched::Site s) const { return {site_base(s), site_kernels(s)}; }

  // Split blocks (split_matmuls.cpp): a matmul's output rows divided between
  // the device (rows [0, r), from the window) and the host lane (rows
  // [r, n), from the layer's host bytes), joined on the device.
  HostBuffer split_tmp;  // per matmul of a group, the halves before the join: [T][r] + [T][n - r]
  std::unique_ptr<Event> split_x_ev, split_y_ev;  // x on the host / the device half's output on the host
  struct SplitOut {
    const GgufTensorInfo* t;
    float* y;  // [T][n_out] on the device
  };
  struct SplitJoin;
  Status init_split();
  std::vector<sched::SplitTensor> split_tensors(int b, int layer) const;
  Status split_matmuls(const sched::LayerRun& run, Stream& s, const float* x, int n_tokens,
                       std::initializer_list<SplitOut> outs);
  Status split_halves(const sched::LayerRun& run, Stream& s, Stream& host_lane, const float* x, float* xh,
                      int n_tokens, const SplitOut& o, SplitJoin& j);
};

}  // namespace layerstream::llama

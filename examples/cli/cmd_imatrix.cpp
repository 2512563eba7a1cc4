// `layerstream imatrix MODEL -f TEXT -o imatrix.gguf`: an importance matrix
// computed as llama.cpp's llama-imatrix computes it, for `quantize --imatrix`:
// the text's tokens (BOS where the tokenizer adds one, special tokens not
// parsed) cut into chunks of --chunk tokens (each chunk from an empty KV
// cache, its first token replaced by BOS), and for every matmul of every
// block the squares of its input rows summed per column, with the number of
// rows (runtime/model/imatrix_collector.h). The runner reports the inputs
// (RunnerOptions::matmul_inputs), so the blocks run where they are in host
// memory: the host backend, or the host site under --backend cuda. Progress
// and the ETA on stderr; Ctrl-C stops it and writes nothing.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "examples/cli/cli_common.h"
#include "runtime/core/cancel.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/model_impl.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/imatrix_collector.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream::cli {
namespace {

using Clock = std::chrono::steady_clock;

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno("cannot open the text " + path, errno);
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) return Status::InvalidArgument("the text " + path + " is empty");
  return ss.str();
}

// The text's tokens as llama-imatrix makes them, and the BOS that starts each
// chunk when the tokenizer adds one.
struct Tokens {
  std::vector<int32_t> ids;
  std::optional<int32_t> bos;
};

Result<Tokens> tokenize(const GgufFile& file, const std::string& model, const std::string& text) {
  LS_ASSIGN_OR_RETURN(TokenizerVocab vocab, read_tokenizer_vocab(file));
  auto tok = Tokenizer::create(std::move(vocab));
  if (!tok.ok()) return tok.status().WithContext(model);
  if ((*tok)->vocab().add_eos) {
    return Status::Unsupported(model + ": the tokenizer appends EOS (add_eos_token); llama-imatrix refuses such "
                                       "models too");
  }
  Tokens t;
  t.ids = (*tok)->encode(text, /*add_special=*/true, /*parse_special=*/false);
  if ((*tok)->vocab().add_bos) t.bos = (*tok)->bos();
  return t;
}

// "chunk 3/40  1.21 s/chunk  ETA 0:00:45", redrawn on a terminal, a line per
// chunk otherwise.
class ChunkProgress {
 public:
  ChunkProgress(int n_chunks, bool tty) : n_(n_chunks), tty_(tty), start_(Clock::now()) {}
  void chunk_done(int i) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double per_chunk = elapsed / (i + 1);
    std::fprintf(stderr, "%schunk %d/%d  %.2f s/chunk  ETA %s%s", tty_ ? "\r" : "", i + 1, n_, per_chunk,
                 format_seconds(per_chunk * (n_ - i - 1)).c_str(), tty_ ? "\x1b[K" : "\n");
    std::fflush(stderr);
  }
  void finish() const {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  int n_;
  bool tty_;
  Clock::time_point start_;
};

class ImatrixCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    sub.add_option("model", model_, "GGUF model file")->required();
    sub.add_option("-f,--file", text_file_, "Calibration text")->required();
    sub.add_option("-o,--output", out_, "Importance matrix to write (GGUF, via OUT.tmp)")->capture_default_str();
    sub.add_option("--chunk,-c,--ctx-size", chunk_,
                   "Tokens per chunk (llama-imatrix's -c/--ctx-size; each chunk starts from an empty KV cache)")
        ->capture_default_str();
    sub.add_option("--chunks", chunks_, "Chunks to process at most (-1: every whole chunk of the text)")
        ->capture_default_str();
    flags_.add_to(sub, "KV cache positions (0: the chunk size)");
  }

  int run() override {
    if (Status st = check_flags(); !st.ok()) return usage_error(st.message());
    ScopedInterruptHandler interrupt;
    auto text = read_text(text_file_);
    if (!text.ok()) return fail(text.status());
    if (Status st = check_imatrix_output(out_); !st.ok()) return fail(st);
    auto file = read_gguf_file(model_);
    if (!file.ok()) return fail(file.status());
    auto tokens = tokenize(*file, model_, *text);
    if (!tokens.ok()) return fail(tokens.status());
    const int n_max = static_cast<int>(tokens->ids.size() / static_cast<size_t>(chunk_));
    if (n_max == 0) {
      return fail(Status::InvalidArgument(
          text_file_ + " tokenizes to " + std::to_string(tokens->ids.size()) + " tokens, fewer than one chunk of " +
          std::to_string(chunk_) + ": give a longer text or a smaller --chunk"));
    }
    const int n_chunks = chunks_ < 0 ? n_max : std::min(chunks_, n_max);
    ImatrixCollector collector;
    auto runner = open_runner(std::move(*file), collector);
    if (!runner.ok()) return fail(runner.status());
    std::cerr << "imatrix: " << tokens->ids.size() << " tokens, " << n_chunks << " chunks of " << chunk_ << "\n";
    if (Status st = run_chunks(**runner, *tokens, n_chunks); !st.ok()) return fail(st);
    ImatrixFileInfo info{{text_file_}, static_cast<uint32_t>(n_chunks), static_cast<uint32_t>(chunk_)};
    if (Status st = collector.write(out_, info); !st.ok()) return fail(st);
    std::cout << "wrote " << out_ << ": " << collector.snapshot().size() << " matrices, " << n_chunks
              << " chunks of " << chunk_ << " tokens\n";
    return kExitOk;
  }

 private:
  Status check_flags() {
    LS_RETURN_IF_ERROR(flags_.resolve());
    if (chunk_ < 1) return Status::InvalidArgument("--chunk must be >= 1, got " + std::to_string(chunk_));
    if (chunks_ == 0) return Status::InvalidArgument("--chunks must be > 0 (or -1: all)");
    const int ctx = flags_.options.context;
    if (ctx != 0 && ctx < chunk_) {
      return Status::InvalidArgument("--ctx " + std::to_string(ctx) + " cannot hold a chunk of " +
                                     std::to_string(chunk_) + " tokens");
    }
    return Status::OK();
  }

  // The runner with the collector as its matmul-input observer. Auto picks
  // the host backend; on a device backend the blocks run on the host site.
  Result<std::unique_ptr<llama::LlamaRunner>> open_runner(GgufFile file, ImatrixCollector& collector) {
    ModelOptions mo = flags_.options;
    if (mo.backend == Backend::kAuto) mo.backend = Backend::kHost;
    llama::RunnerOptions ro = runner_options_for(mo);
    ro.n_ctx = std::max(mo.context, chunk_);
    ro.prefill_chunk = chunk_;  // one pass per chunk, as llama-imatrix's batch
    ro.trace = false;
    ro.matmul_inputs = [&collector](std::span<const GgufTensorInfo* const> w, const float* x, int n) {
      return collector.add(w, x, n);
    };
    LS_ASSIGN_OR_RETURN(device_, open_device(device_options_for(mo)));
    if (device_->info().backend != BackendKind::kHost && ro.strategy != llama::Strategy::kHost) {
      std::cerr << "imatrix: the blocks run on the host site (strategy host), where their inputs are readable\n";
      ro.strategy = llama::Strategy::kHost;
    }
    return llama::LlamaRunner::create(*device_, model_, std::move(file), ro);
  }

  // Each chunk from an empty KV cache, its first token BOS, no logits.
  Status run_chunks(llama::LlamaRunner& runner, const Tokens& tokens, int n_chunks) const {
    ChunkProgress progress(n_chunks, stderr_is_tty());
    std::vector<llama::PassToken> batch(static_cast<size_t>(chunk_));
    Status st;
    for (int c = 0; c < n_chunks && st.ok(); ++c) {
      st = runner.reset(0);
      for (int i = 0; i < chunk_; ++i) batch[i] = {tokens.ids[size_t(c) * chunk_ + i], i, 0, false};
      if (tokens.bos) batch[0].token = *tokens.bos;
      if (st.ok()) st = runner.decode_tokens(batch, nullptr, [] { return cancel_requested(); });
      if (st.ok()) progress.chunk_done(c);
    }
    progress.finish();
    if (st.code() == StatusCode::kCancelled) return Status::Cancelled("interrupted: " + out_ + " was not written");
    return st;
  }

  std::string model_, text_file_, out_ = "imatrix.gguf";
  int chunk_ = 512, chunks_ = -1;
  ModelFlags flags_;
  std::unique_ptr<Device> device_;  // outlives the runner (declared before it is made)
};

}  // namespace

LS_REGISTER_COMMAND(ImatrixCommand, "imatrix",
                    "Importance matrix of a model over a text (GGUF, as llama-imatrix writes) for quantize --imatrix");

}  // namespace layerstream::cli

// `layerstream perplexity MODEL -f TEXT`: perplexity of the model over a text,
// computed as llama.cpp's llama-perplexity does (runtime/llama/perplexity.h:
// non-overlapping windows of --ctx tokens, BOS at the start of each window
// when the tokenizer adds one, the second half of each window scored). Runs
// streamed like `run` under --vram / --ram. Per-window figures go to stdout
// as they come ("[i]running-ppl," like llama-perplexity), progress to stderr.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "examples/cli/cli_common.h"
#include "layerstream/units.h"
#include "runtime/core/cancel.h"
#include "runtime/core/status_macros.h"
#include "runtime/llama/model_impl.h"
#include "runtime/llama/perplexity.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/scheduler/planner.h"
#include "runtime/tokenizer/tokenizer.h"

namespace layerstream::cli {
namespace {

// Default tokens per pass: the head keeps [tokens][n_vocab] float logits in
// the reserve, so a big vocabulary gets smaller passes (about 32 MiB).
int default_pass_tokens(uint32_t n_vocab, int n_ctx) {
  const uint64_t by_logits = (32ull << 20) / (uint64_t{n_vocab} * 4);
  return static_cast<int>(std::clamp<uint64_t>(by_logits, 8, static_cast<uint64_t>(n_ctx)));
}

class PerplexityCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    add_model_arg(sub, model_)->required();
    sub.add_option("-f,--file", text_file_, "Text file to score")->required();
    sub.add_option("--chunks", chunks_, "Windows to score (-1: all that fit)")->capture_default_str();
    sub.add_option("--prefill-chunk", prefill_chunk_, "Max tokens of one pass (0: from the vocabulary size, <= ctx)");
    add_json_flag(sub, json_, "Write the result as JSON to FILE (key \"perplexity\")");
    flags_.add_to(sub, "Tokens per window (0: 512)");
  }

  int run() override {
    if (Status st = check_flags(); !st.ok()) return usage_error(st.message());
    const int ctx = flags_.options.context;
    llama::RunnerOptions ro = runner_options_for(flags_.options);

    std::ifstream in(text_file_, std::ios::binary);
    if (!in) return fail(Status::IOError("cannot open " + text_file_));
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();

    ScopedInterruptHandler interrupt;
    auto file = read_gguf_file(model_);
    if (!file.ok()) return fail(file.status());
    auto vocab = read_tokenizer_vocab(*file);
    if (!vocab.ok()) return fail(vocab.status());
    auto tok = Tokenizer::create(std::move(*vocab));
    if (!tok.ok()) return fail(tok.status().WithContext(model_));
    if ((*tok)->vocab().add_eos)
      return fail(Status::Unsupported(model_ +
                                      ": the tokenizer appends EOS (add_eos_token); perplexity as "
                                      "llama-perplexity computes it needs a tokenizer that does not"));
    // As llama-perplexity: BOS where the file asks, special tokens in the text not parsed.
    const std::vector<int32_t> tokens = (*tok)->encode(text, /*add_special=*/true, /*parse_special=*/false);

    auto dev = open_device(device_options_for(flags_.options));
    if (!dev.ok()) return fail(dev.status());
    ro.n_ctx = ctx;
    ro.logits_all = true;
    ro.trace = false;
    {
      auto m = load_llama_model(*file);
      if (!m.ok()) return fail(m.status().WithContext(model_));
      ro.prefill_chunk = prefill_chunk_ ? std::min(prefill_chunk_, ctx) : default_pass_tokens(m->hparams.n_vocab, ctx);
    }
    auto runner = llama::LlamaRunner::create(**dev, model_, ro);
    if (!runner.ok()) return fail(runner.status());
    const std::string plan = sched::describe_plan((*runner)->plan(), (*runner)->executor().layer_bytes());
    std::cerr << "perplexity: " << tokens.size() << " tokens, ctx " << ctx << ", " << ro.prefill_chunk
              << " tokens per pass, plan: " << plan << "\n";

    llama::PerplexityOptions po;
    po.n_ctx = ctx;
    po.n_chunks = chunks_;
    if ((*tok)->vocab().add_bos) po.bos = (*tok)->bos();
    const bool tty = stderr_is_tty();
    auto res = llama::compute_perplexity(**runner, tokens, po, [&](const llama::PerplexityChunk& c, int n) {
      std::printf("[%d]%.4f,", c.index + 1, c.running_ppl);
      std::fflush(stdout);
      if (tty)
        std::fprintf(stderr, "\rwindow %d/%d (%.2f s)   ", c.index + 1, n, c.seconds);
      else if (c.index == 0)
        std::fprintf(stderr, "%.2f seconds per window, %d windows\n", c.seconds, n);
      return !cancel_requested();
    });
    if (tty) std::fprintf(stderr, "\n");
    std::printf("\n");
    if (!res.ok()) return fail(res.status());
    std::printf("Final estimate: PPL = %.4f +/- %.5f  (%d windows of %d tokens, %lld scored)\n", res->ppl,
                res->ppl_stderr, res->n_chunks, res->n_ctx, static_cast<long long>(res->scored));

    if (!json_.empty()) {
      nlohmann::json j = result_json(*res, ro.prefill_chunk, plan, (*runner)->streamed_bytes_per_pass());
      if (Status st = write_json_file(json_, j); !st.ok()) return fail(st);
    }
    return kExitOk;
  }

 private:
  // The shared model flags, then this command's own; --ctx 0 is 512 tokens.
  Status check_flags() {
    LS_RETURN_IF_ERROR(flags_.resolve());
    if (flags_.options.context == 0) flags_.options.context = 512;
    const int ctx = flags_.options.context;
    if (ctx < 4) return Status::InvalidArgument("--ctx must be >= 4, got " + std::to_string(ctx));
    if (prefill_chunk_ < 0) return Status::InvalidArgument("--prefill-chunk must be >= 0");
    return Status::OK();
  }

  // What `perplexity --json` writes.
  nlohmann::json result_json(const llama::PerplexityResult& res, int tokens_per_pass, const std::string& plan,
                             uint64_t streamed_bytes_per_pass) const {
    nlohmann::json chunks = nlohmann::json::array();
    for (const auto& c : res.chunks)
      chunks.push_back({{"index", c.index}, {"nll", c.nll}, {"running_ppl", c.running_ppl}, {"seconds", c.seconds}});
    return {{"model", model_},
            {"text", text_file_},
            {"perplexity", res.ppl},
            {"perplexity_stderr", res.ppl_stderr},
            {"ctx", res.n_ctx},
            {"chunks", res.n_chunks},
            {"tokens", res.n_tokens},
            {"scored_tokens", res.scored},
            {"tokens_per_pass", tokens_per_pass},
            {"kv_type", flags_.kv_type},
            {"exact", flags_.options.exact},
            {"plan", plan},
            {"streamed_bytes_per_pass", streamed_bytes_per_pass},
            {"per_chunk", chunks}};
  }

  std::string model_, text_file_, json_;
  int chunks_ = -1, prefill_chunk_ = 0;
  ModelFlags flags_;
};

}  // namespace

LS_REGISTER_COMMAND(PerplexityCommand, "perplexity",
                    "Perplexity over a text, as llama-perplexity computes it (streamed under --vram)");

}  // namespace layerstream::cli

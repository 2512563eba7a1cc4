// `layerstream run MODEL`: generates text from a Llama-family GGUF model on
// memory budgets that may be smaller than the model, streaming layers from
// pinned RAM and disk. Text goes to stdout as it is produced, then a summary.
// Default --vram: cuda 90% of free device memory; host what the whole model
// needs (capped at 90% of free RAM), logged on stderr.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "examples/cli/cli_common.h"
#include "examples/cli/sampling_flags.h"
#include "examples/cli/speculative_flags.h"
#include "layerstream/chat.h"
#include "layerstream/layerstream.h"
#include "layerstream/units.h"
#include "runtime/core/cancel.h"
#include "runtime/core/status_macros.h"

namespace layerstream::cli {
namespace {

Result<std::vector<int32_t>> parse_tokens(const std::string& text) {
  std::vector<int32_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      out.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return Status::InvalidArgument("--tokens: '" + item + "' is not a token id (want e.g. 1,2,3)");
    }
  }
  if (out.empty()) return Status::InvalidArgument("--tokens: no token ids given");
  return out;
}

// A float32 .npy (format 1.0) of shape (rows, cols).
Status write_npy(const std::string& path, const std::vector<float>& data, size_t rows, size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) return Status::IOError("cannot open " + path + " for writing");
  const uint16_t hlen = static_cast<uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.put(static_cast<char>(hlen & 0xff));
  f.put(static_cast<char>(hlen >> 8));
  f.write(header.data(), header.size());
  f.write(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  if (!f) return Status::IOError("short write to " + path);
  return Status::OK();
}

// Per sequence, per generated token: {token, logprob, top: [[token, logprob], ...]}.
nlohmann::json logprobs_json(const std::vector<std::vector<TokenLogprob>>& per_sequence) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& tokens : per_sequence) {
    nlohmann::json seq = nlohmann::json::array();
    for (const TokenLogprob& t : tokens) seq.push_back({{"token", t.token}, {"logprob", t.logprob}, {"top", t.top}});
    out.push_back(std::move(seq));
  }
  return out;
}

// What `run --json` writes: the tokens, text and every figure of the stats.
nlohmann::json result_json(const std::string& model, const GenerateResult& res) {
  const Stats& s = res.stats;
  nlohmann::json j = {
      {"model", model},
      {"prompt_tokens", res.prompt_tokens},
      {"generated_tokens", res.generated.size() == 1 ? nlohmann::json(res.generated[0])
                                                      : nlohmann::json(res.generated)},
      {"text", res.text},
      {"seeds", res.seeds},
      {"batch", s.batch},
      {"backend", s.backend},
      {"device", s.device},
      {"prefill_s", s.prefill_s},
      {"prefill_tokens_per_s", s.prefill_tokens_per_s},
      {"decode_s", s.decode_s},
      {"decode_tokens_per_s", s.decode_tokens_per_s},
      {"mean_decode_pass_ms", s.mean_decode_pass_ms},
      {"mean_predicted_pass_ms", s.mean_predicted_pass_ms},
      {"mean_lower_bound_ms", s.mean_lower_bound_ms},
      {"overlap_efficiency", s.overlap_efficiency},
      {"bytes_streamed_per_token", s.bytes_streamed_per_token},
      {"bytes_streamed_per_pass", s.bytes_streamed_per_pass},
      {"layers", {{"resident", s.layers_resident}, {"ram", s.layers_ram}, {"disk", s.layers_disk}}},
      {"plan", s.plan},
      {"model_bytes", s.model_bytes},
      {"vram_budget", s.vram_budget},
      {"ram_budget", s.ram_budget},
      {"kv_bytes", s.kv_bytes},
      {"load_bytes", s.load_bytes},
      {"replans", s.replans},
      {"disk_gbps", s.disk_gbps},
  };
  std::vector<std::string> reasons;
  for (FinishReason r : res.finish) reasons.push_back(finish_reason_name(r));
  j["finish_reason"] = reasons;
  if (!res.logprobs.empty()) j["logprobs"] = logprobs_json(res.logprobs);
  if (s.speculative.passes) j["speculative"] = speculative_json(s.speculative);
  return j;
}

class RunCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    add_model_arg(sub, model_)->required();
    sub.add_option("-p,--prompt", prompt_, "Prompt text");
    sub.add_option("--tokens", tokens_, "Prompt as token ids: 1,2,3");
    sub.add_flag("--chat", chat_, "-p is a user message, rendered with the model's chat template");
    add_chat_template_option(sub, chat_template_);
    sub.add_option("-n,--n-predict", gen_.max_tokens, "Tokens to generate per sequence")->capture_default_str();
    sub.add_flag("--ignore-eog", ignore_eog_, "Keep generating past end-of-generation tokens (exactly -n tokens)");
    model_flags_.add_to(sub);
    sub.add_option("--batch", mo_.sequences, "Sequences decoded together (the prompt decoded once and copied; seeds seed+i)")
        ->capture_default_str();
    sampling_flags_.add_to(sub);
    sub.add_option("--stop", gen_.stop, "Stop before this text (not printed); repeatable")
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    sub.add_option("--logprobs", gen_.logprobs,
                   "Log-probabilities of each generated token and its N most likely alternatives in --json "
                   "(0: the token only)");
    sub.add_option("--trace", trace_, "Write a Chrome trace (chrome://tracing, Perfetto) to FILE");
    add_json_flag(sub, json_);
    sub.add_option("--logits", logits_, "Write the logits of every generated position (sequence 0) as float32 .npy");
    spec_.add_to(sub);
  }

  int run() override {
    if (prompt_.empty() == tokens_.empty()) return usage_error("give exactly one of -p TEXT or --tokens 1,2,3");
    if (Status s = model_flags_.resolve(); !s.ok()) return usage_error(s.message());
    if (mo_.sequences < 1) return usage_error("--batch must be >= 1");
    if (Status s = sampling_flags_.resolve(); !s.ok()) return usage_error(s.message());
    gen_.sampling = sampling_flags_.options;
    gen_.structured = sampling_flags_.structured;
    for (const std::string& s : gen_.stop)
      if (s.empty()) return usage_error("--stop: the text must not be empty");
    if (gen_.logprobs < -1) return usage_error("--logprobs must be >= 0");
    mo_.trace = !trace_.empty();
    gen_.keep_logits = !logits_.empty();
    gen_.stop_at_eog = !ignore_eog_;

    // SIGINT/SIGTERM stop generation at the next token and exit through the
    // error path (no --json/--trace/--logits file is written).
    // The chat prompt before the model loads: a bad template fails at once.
    std::optional<std::string> chat;
    if (tokens_.empty() && (chat_ || !chat_template_.empty())) {
      auto rendered = chat_prompt();
      if (!rendered.ok()) return fail(rendered.status());
      chat = std::move(*rendered);
    }
    ScopedInterruptHandler interrupt;
    const auto interrupted = [] { return fail(Status::Cancelled("run was interrupted")); };
    mo_.progress = [](float) { return !cancel_requested(); };  // SIGINT while loading cancels it
    ModelOptions pool = mo_;
    pool.sequences += spec_.extra_sequences();  // a draft tree's side branches
    auto model = Model::open(model_, pool);
    if (!model.ok()) return cancel_requested() ? interrupted() : fail(model.status());
    if (cancel_requested()) return interrupted();
    ContextOptions co;
    co.sequences = mo_.sequences;
    auto context = (*model)->create_context(co);
    if (!context.ok()) return fail(context.status());
    auto draft = spec_.open(**model);
    if (!draft.ok()) return fail(draft.status());
    gen_.speculative = spec_.options(*draft);
    if (cancel_requested()) return interrupted();
    std::vector<int32_t> prompt;
    if (!tokens_.empty()) {
      auto t = parse_tokens(tokens_);
      if (!t.ok()) return fail(t.status());
      prompt = *t;
    } else if (chat) {
      prompt = (*model)->tokenize(*chat, true);
    } else {
      prompt = (*model)->tokenize(prompt_, true);
    }
    // From here stdout carries the generated text: unless the user chose a
    // log level, only warnings and errors may reach the terminal meanwhile
    // (an info line would land in the middle of the text).
    QuietLogsWhileGenerating quiet;
    const bool echo = tokens_.empty() && !chat_ && chat_template_.empty();  // a chat reply is shown alone
    if (mo_.sequences == 1 && echo) std::cout << prompt_ << std::flush;
    const int batch = mo_.sequences;
    auto res = (*context)->generate(prompt, gen_, [batch](const TokenEvent& e) {
      if (batch == 1) std::cout << e.piece << std::flush;
      return !cancel_requested();
    });
    if (cancel_requested()) {
      if (batch == 1) std::cout << "\n";
      return interrupted();
    }
    if (!res.ok()) return fail(res.status());
    if (batch == 1) {
      std::cout << "\n";
    } else {
      for (int i = 0; i < batch; ++i)
        std::cout << "[" << i << "] " << (echo ? prompt_ : "") << res->text[i] << "\n";
    }
    std::cout << "\n" << format_stats(res->stats);
    if (res->stats.speculative.passes) std::cout << format_speculative(res->stats.speculative);

    if (!trace_.empty()) {
      if (Status s = (*context)->write_trace(trace_); !s.ok()) return fail(s);
    }
    if (!logits_.empty()) {
      const size_t rows = res->vocab ? res->logits.size() / res->vocab : 0;
      if (Status s = write_npy(logits_, res->logits, rows, res->vocab); !s.ok()) return fail(s);
    }
    if (!json_.empty()) {
      if (Status st = write_json_file(json_, result_json(model_, *res)); !st.ok()) return fail(st);
    }
    return kExitOk;
  }

 private:
  // -p as one user message through the chat template (--chat-template's or
  // the file's).
  Result<std::string> chat_prompt() const {
    LS_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::for_file(model_, chat_template_));
    return tmpl.apply({{.role = "user", .content = prompt_}}, {.leave_bos_to_tokenizer = true});
  }

  std::string model_, prompt_, tokens_, trace_, json_, logits_, chat_template_;
  bool chat_ = false;
  ModelFlags model_flags_;
  SamplingFlags sampling_flags_;
  SpeculativeFlags spec_;
  ModelOptions& mo_ = model_flags_.options;
  GenerateOptions gen_;
  bool ignore_eog_ = false;
};

}  // namespace

LS_REGISTER_COMMAND(RunCommand, "run", "Generate text from a GGUF model on a memory budget");

}  // namespace layerstream::cli

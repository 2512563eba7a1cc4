// `bench --draft | --lookup` (bench_speculative.h).
#include "examples/cli/bench_speculative.h"

#include <fmt/format.h>

#include <iostream>

#include "examples/cli/cli_common.h"
#include "runtime/planning/stats.h"

namespace layerstream::cli {
namespace {

struct Side {
  std::vector<double> tokens_per_s, pass_ms;
  std::vector<int32_t> tokens;  // of the last round
  SpeculativeStats spec;        // of the last round
};

// One round of one side on a fresh context.
Status round(Model& model, const std::vector<int32_t>& prompt, const GenerateOptions& g, Side& side) {
  LS_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, model.create_context());
  LS_ASSIGN_OR_RETURN(GenerateResult r, ctx->generate(prompt, g));
  side.tokens_per_s.push_back(r.stats.decode_tokens_per_s);
  side.pass_ms.push_back(r.stats.mean_decode_pass_ms);
  side.tokens = r.generated[0];
  side.spec = r.stats.speculative;
  return Status::OK();
}

std::string line(const std::string& name, const Side& s) {
  const planning::MinMedMax t = planning::summarize(s.tokens_per_s), p = planning::summarize(s.pass_ms);
  return fmt::format("{:<12} decode tokens/s min {:8.2f} median {:8.2f} max {:8.2f}   pass ms median {:8.2f}\n", name,
                     t.min, t.median, t.max, p.median);
}

nlohmann::json side_json(const Side& s) {
  const planning::MinMedMax t = planning::summarize(s.tokens_per_s);
  return nlohmann::json{{"decode_tokens_per_s", {{"min", t.min}, {"median", t.median}, {"max", t.max}}},
                        {"mean_pass_ms", s.pass_ms}};
}

double speedup(const Side& s, const Side& plain) {
  return planning::summarize(s.tokens_per_s).median / planning::summarize(plain.tokens_per_s).median;
}

// The sides after the rounds: the speculative one, and with a tree the chain
// at the same draft budget (tokens per pass side by side).
void print(const SpeculativeBenchOptions& o, const std::string& draft, size_t prompt_tokens, const Side& plain,
           const Side* chain, const Side& spec) {
  std::cout << fmt::format("{} tokens greedy from a {}-token prompt, {} rounds each; draft: {} (at most {} per pass, "
                           "{} branches at most)\n",
                           o.tokens, prompt_tokens, o.rounds, draft, o.spec.draft_max, o.spec.branches)
            << line("plain", plain);
  if (chain)
    std::cout << line("chain", *chain) << fmt::format("chain speedup {:.2f}x; tokens {}\n", speedup(*chain, plain),
                                                      chain->tokens == plain.tokens ? "identical" : "DIFFER")
              << format_speculative(chain->spec);
  std::cout << line(chain ? "tree" : "speculative", spec)
            << fmt::format("speedup (median tokens/s) {:.2f}x; tokens {}\n", speedup(spec, plain),
                           spec.tokens == plain.tokens ? "identical" : "DIFFER from plain decoding")
            << format_speculative(spec.spec);
  if (chain)
    std::cout << fmt::format("tokens per pass at {} drafts: chain {:.2f}, tree {:.2f}\n", o.spec.draft_max,
                             chain->spec.tokens_per_pass(), spec.spec.tokens_per_pass());
}

}  // namespace

int run_speculative_bench(const SpeculativeBenchOptions& o) {
  ModelOptions pool = o.model;
  pool.sequences += o.spec.extra_sequences();  // a draft tree's side branches
  auto model = Model::open(o.model_path, pool);
  if (!model.ok()) return fail(model.status());
  auto draft = o.spec.open(**model);
  if (!draft.ok()) return fail(draft.status());
  const std::vector<int32_t> prompt = (*model)->tokenize(o.prompt, true);
  GenerateOptions plain;
  plain.max_tokens = o.tokens;
  plain.sampling.temperature = 0;
  plain.stop_at_eog = false;
  GenerateOptions spec = plain, chain = plain;
  spec.speculative = o.spec.options(*draft);
  chain.speculative = spec.speculative;
  chain.speculative.branches = 1;
  const bool tree = o.spec.branches > 1;
  Side a, b, c;
  for (int i = 0; i < o.rounds; ++i) {  // alternating: every side sees the same box
    std::cerr << fmt::format("bench: round {}/{}\n", i + 1, o.rounds);
    if (Status s = round(**model, prompt, plain, a); !s.ok()) return fail(s);
    if (tree)
      if (Status s = round(**model, prompt, chain, c); !s.ok()) return fail(s);
    if (Status s = round(**model, prompt, spec, b); !s.ok()) return fail(s);
  }
  const bool same = a.tokens == b.tokens && (!tree || a.tokens == c.tokens);
  print(o, (*draft)->name(), prompt.size(), a, tree ? &c : nullptr, b);
  if (!o.json.empty()) {
    nlohmann::json j = {{"model", o.model_path},          {"draft", (*draft)->name()},
                        {"draft_max", o.spec.draft_max},   {"branches", o.spec.branches},
                        {"tokens", o.tokens},              {"rounds", o.rounds},
                        {"plain", side_json(a)},           {"speculative", side_json(b)},
                        {"speedup", speedup(b, a)},        {"identical", same},
                        {"figures", speculative_json(b.spec)}};
    if (tree) {
      j["chain"] = side_json(c);
      j["chain_speedup"] = speedup(c, a);
      j["chain_figures"] = speculative_json(c.spec);
    }
    if (Status s = write_json_file(o.json, j); !s.ok()) return fail(s);
  }
  if (!same) return fail(Status::Internal("speculative tokens differ from plain greedy tokens"));
  return kExitOk;
}

}  // namespace layerstream::cli

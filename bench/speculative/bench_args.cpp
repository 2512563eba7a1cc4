// Flags and shared steps of bench_speculative (bench_args.h).
#include "bench/speculative/bench_args.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "runtime/core/status_macros.h"

namespace layerstream::bench_speculative {
namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

// Sets the field of flag f from v; false for an unknown flag.
bool set(Args& a, const std::string& f, const std::string& v) {
  if (f == "--kinds") {
    a.kinds = split(v);
  } else if (f == "--lengths") {
    a.lengths.clear();
    for (const std::string& n : split(v)) a.lengths.push_back(std::atoi(n.c_str()));
  } else if (f == "--draft") {
    a.draft = v;
  } else if (f == "--json") {
    a.json = v;
  } else if (f == "--prompt") {
    a.prompt = v;
  } else if (f == "--vram") {
    a.vram = std::strtoull(v.c_str(), nullptr, 10);
  } else if (f == "--ram") {
    a.ram = std::strtoull(v.c_str(), nullptr, 10);
  } else if (f == "--sim-link") {
    a.sim_link = std::atof(v.c_str());
  } else if (f == "--prompts") {
    a.prompts = std::atoi(v.c_str());
  } else if (f == "--tokens") {
    a.tokens = std::atoi(v.c_str());
  } else if (f == "--rounds") {
    a.rounds = std::atoi(v.c_str());
  } else if (f == "--ctx") {
    a.ctx = std::atoi(v.c_str());
  } else if (f == "--threads") {
    a.threads = std::atoi(v.c_str());
  } else {
    return false;
  }
  return true;
}

}  // namespace

bool parse(int argc, char** argv, Args& a) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f.rfind("--", 0) != 0) {
      positional.push_back(f);
    } else if (i + 1 >= argc || !set(a, f, argv[++i])) {
      std::cerr << "bench_speculative: unknown flag or missing value: " << f << "\n";
      return false;
    }
  }
  if (positional.size() != 2 || a.prompts < 1 || a.tokens < 1 || a.rounds < 1 || a.ctx < 1) {
    std::cerr << "usage: bench_speculative identity|lengths MODEL [flags] (see bench/speculative/main.cpp)\n";
    return false;
  }
  a.mode = positional[0];
  a.model = positional[1];
  return true;
}

Result<std::shared_ptr<Model>> open_target(const Args& a) {
  ModelOptions o;
  o.backend = Backend::kHost;
  o.host_threads = a.threads;
  o.context = a.ctx;
  o.vram_budget = a.vram;
  o.ram_budget = a.ram;
  o.sim_link_gbps = a.sim_link;
  o.strategy = a.vram ? Strategy::kOverlap : Strategy::kResident;
  return Model::open(a.model, o);
}

Result<std::shared_ptr<DraftSource>> make_draft(const std::string& kind, const Args& a, const Model& target) {
  if (kind == "lookup") {
    LS_ASSIGN_OR_RETURN(std::unique_ptr<DraftSource> lookup, make_lookup_draft());
    return std::shared_ptr<DraftSource>(std::move(lookup));
  }
  if (kind != "chain") return Status::InvalidArgument("unknown draft kind " + kind + " (lookup, chain)");
  if (a.draft.empty()) return Status::InvalidArgument("draft kind chain needs --draft FILE");
  ModelOptions o;
  o.backend = Backend::kHost;
  o.host_threads = a.threads;
  o.context = a.ctx;
  o.strategy = Strategy::kResident;  // the draft stays resident, as `run --draft` keeps it
  LS_ASSIGN_OR_RETURN(std::shared_ptr<Model> draft, Model::open(a.draft, o));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<DraftSource> chain, make_model_draft(draft, target));
  return std::shared_ptr<DraftSource>(std::move(chain));
}

Result<GenerateResult> greedy(Model& model, const std::vector<int32_t>& tokens, int n,
                              const std::shared_ptr<DraftSource>& draft, int draft_max, bool adaptive) {
  GenerateOptions g;
  g.max_tokens = n;
  g.sampling.temperature = 0;
  g.stop_at_eog = false;
  g.speculative = {draft, draft_max, adaptive};
  LS_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, model.create_context());
  return ctx->generate(tokens, g);
}

int fail(const Status& s) {
  std::cerr << "bench_speculative: " << s.ToString() << "\n";
  return 2;
}

}  // namespace layerstream::bench_speculative

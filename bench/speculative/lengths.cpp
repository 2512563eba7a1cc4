// bench_speculative lengths: decode tokens/s at each fixed draft length and
// with the length DraftLength chooses from measured costs, in one process
// at one link speed. Rounds interleave the settings (rotated each round),
// so a busy machine slows them alike; medians over rounds are compared.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/speculative/bench_args.h"

namespace layerstream::bench_speculative {
namespace {

struct Setting {
  std::string name;   // "plain", "fixed N", "adaptive"
  int draft_max = 0;  // 0: plain
  bool adaptive = false;
  std::vector<double> tokens_per_s;
  double mean_length = 0, tokens_per_pass = 0;  // of the last round
  bool identical = true;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::vector<Setting> settings(const Args& a) {
  std::vector<Setting> s = {{.name = "plain"}};
  for (int n : a.lengths) s.push_back({.name = "fixed " + std::to_string(n), .draft_max = n});
  s.push_back({.name = "adaptive", .draft_max = kMaxDraftTokens, .adaptive = true});
  return s;
}

nlohmann::json report(const Args& a, const std::vector<Setting>& s) {
  nlohmann::json j = {{"model", a.model}, {"draft", a.draft},   {"sim_link_gbps", a.sim_link},
                      {"vram", a.vram},   {"tokens", a.tokens}, {"rounds", a.rounds}};
  double best_fixed = 0, adaptive = 0, plain = 0;
  std::string best_name;
  for (const Setting& x : s) {
    const double m = median(x.tokens_per_s);
    j["settings"].push_back({{"name", x.name},
                             {"tokens_per_s", x.tokens_per_s},
                             {"median", m},
                             {"mean_draft_length", x.mean_length},
                             {"tokens_per_pass", x.tokens_per_pass},
                             {"identical", x.identical}});
    if (x.adaptive)
      adaptive = m;
    else if (x.draft_max == 0)
      plain = m;
    else if (m > best_fixed)
      best_fixed = m, best_name = x.name;
  }
  j["plain"] = plain;
  j["best_fixed"] = best_name;
  j["adaptive_vs_best"] = best_fixed > 0 ? adaptive / best_fixed : 0;
  return j;
}

}  // namespace

int run_lengths(const Args& a) {
  auto model = open_target(a);
  if (!model.ok()) return fail(model.status());
  auto draft = make_draft("chain", a, **model);
  if (!draft.ok()) return fail(draft.status());
  const std::vector<int32_t> tokens = (*model)->tokenize(a.prompt, true);
  std::vector<Setting> s = settings(a);
  std::vector<int32_t> plain_tokens;
  for (int r = 0; r < a.rounds; ++r) {
    for (size_t k = 0; k < s.size(); ++k) {
      Setting& x = s[(k + r) % s.size()];
      auto g = greedy(**model, tokens, a.tokens, x.draft_max ? *draft : nullptr, std::max(1, x.draft_max),
                      x.adaptive);
      if (!g.ok()) return fail(g.status());
      x.tokens_per_s.push_back(g->stats.decode_tokens_per_s);
      x.mean_length = g->stats.speculative.mean_draft_length();
      x.tokens_per_pass = g->stats.speculative.tokens_per_pass();
      if (x.draft_max == 0)
        plain_tokens = g->generated[0];
      else if (!plain_tokens.empty())
        x.identical = x.identical && g->generated[0] == plain_tokens;
      std::cerr << "round " << r + 1 << " " << x.name << ": " << g->stats.decode_tokens_per_s
                << " tokens/s\n";
    }
  }
  const nlohmann::json j = report(a, s);
  std::cout << j.dump() << "\n";
  if (!a.json.empty()) std::ofstream(a.json) << j.dump(2) << "\n";
  return 0;
}

}  // namespace layerstream::bench_speculative

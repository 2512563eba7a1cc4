// bench_speculative identity: greedy tokens with each draft kind equal plain
// greedy tokens, prompt by prompt. Plain and speculative generations
// alternate, so both decode times see the same (shared, busy) machine.
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/speculative/bench_args.h"

namespace layerstream::bench_speculative {
namespace {

// Prompt i: a passage in a frame. Frames that quote the passage back
// (repeat, rewrite, say again) give lookup drafts to find; the others ask
// for new text, where most drafts are wrong.
std::string prompt(int i) {
  static const char* passages[] = {
      "The quick brown fox jumps over the lazy dog near the river bank.",
      "Water boils at one hundred degrees Celsius at sea level.",
      "The library opens at nine in the morning and closes at six in the evening.",
      "In 1969 two astronauts walked on the Moon while a third orbited above them.",
      "A binary search halves the range it looks in at every step.",
      "The train to the coast leaves from platform four every hour on the hour.",
      "Bread needs flour, water, salt and yeast, and time to rise.",
      "The committee will meet on Tuesday to review the budget for next year.",
  };
  static const char* frames[] = {
      "Repeat this passage exactly. Passage: {} Repeated:",
      "Rewrite the passage in the past tense. Passage: {} Rewritten:",
      "Question: what is the passage about? Passage: {} Answer:",
      "Continue the story. {}",
      "Translate to French: {}",
      "Write a short poem about this: {}",
      "List three facts related to this sentence: {}",
      "{} {} Say the first sentence again:",
  };
  constexpr int kPassages = sizeof(passages) / sizeof(passages[0]);
  constexpr int kFrames = sizeof(frames) / sizeof(frames[0]);
  std::string text = frames[(i / kPassages) % kFrames];
  const std::string passage = passages[i % kPassages];
  for (size_t at; (at = text.find("{}")) != std::string::npos;) text.replace(at, 2, passage);
  return text;
}

struct Totals {
  double decode_s = 0;
  long tokens = 0, passes = 0, drafted = 0, accepted = 0;
  int differing = 0;  // prompts whose tokens differ from plain decoding's

  void add(const GenerateResult& r) {
    decode_s += r.stats.decode_s;
    tokens += static_cast<long>(r.generated[0].size());
    passes += r.stats.speculative.passes;
    drafted += r.stats.speculative.drafted;
    accepted += r.stats.speculative.accepted;
  }
};

nlohmann::json report(const Args& a, const Model& model, const Totals& plain, uint64_t streamed,
                      const std::map<std::string, Totals>& kinds) {
  nlohmann::json j = {{"model", a.model},
                      {"placement", model.placement()},
                      {"bytes_streamed_per_pass", streamed},
                      {"prompts", a.prompts},
                      {"tokens", a.tokens},
                      {"plain_decode_s", plain.decode_s}};
  for (const auto& [kind, t] : kinds) {
    // Tokens after each prompt's first (sampled from the prefill) per pass.
    const double per_pass = t.passes ? double(t.tokens - a.prompts) / t.passes : 0;
    j["kinds"][kind] = {{"differing_prompts", t.differing},
                        {"decode_s", t.decode_s},
                        {"time_vs_plain", plain.decode_s > 0 ? t.decode_s / plain.decode_s : 0},
                        {"tokens_per_pass", per_pass},
                        {"drafted", t.drafted},
                        {"accepted", t.accepted}};
  }
  return j;
}

}  // namespace

int run_identity(const Args& a) {
  auto model = open_target(a);
  if (!model.ok()) return fail(model.status());
  std::map<std::string, std::shared_ptr<DraftSource>> drafts;
  for (const std::string& kind : a.kinds) {
    auto d = make_draft(kind, a, **model);
    if (!d.ok()) return fail(d.status());
    drafts[kind] = *d;
  }
  Totals plain;
  uint64_t streamed = 0;
  std::map<std::string, Totals> kinds;
  for (int i = 0; i < a.prompts; ++i) {
    const std::vector<int32_t> tokens = (*model)->tokenize(prompt(i), true);
    auto base = greedy(**model, tokens, a.tokens, nullptr);
    if (!base.ok()) return fail(base.status());
    plain.add(*base);
    streamed = base->stats.bytes_streamed_per_pass;
    for (const auto& [kind, draft] : drafts) {
      auto spec = greedy(**model, tokens, a.tokens, draft);
      if (!spec.ok()) return fail(spec.status());
      kinds[kind].add(*spec);
      if (spec->generated[0] == base->generated[0]) continue;
      ++kinds[kind].differing;
      std::cerr << kind << ": prompt " << i << " gives other tokens than plain greedy decoding\n";
    }
  }
  const nlohmann::json j = report(a, **model, plain, streamed, kinds);
  std::cout << j.dump() << "\n";
  if (!a.json.empty()) std::ofstream(a.json) << j.dump(2) << "\n";
  for (const auto& [kind, t] : kinds)
    if (t.differing) return 1;
  return 0;
}

}  // namespace layerstream::bench_speculative

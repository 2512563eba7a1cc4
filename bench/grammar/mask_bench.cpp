// Time per decode step of a grammar-constrained output: fill the next-token
// mask, set the ruled-out logits to -inf, accept the token. Each iteration is
// one token of a valid document (tokenized by the model's tokenizer), the
// matcher reset when the document ends. Compare with the decode time per
// token (SmolLM2-135M: ~15-25 ms here): the issue's bar is 5% of it.
// Needs $LAYERSTREAM_MODELS (bench/peer/fetch-models.sh); without it, or in a
// build without the grammar engine, it says so and runs nothing.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/grammar/grammar_matcher.h"
#include "tests/grammar/real_vocab.h"

namespace layerstream::grammar {
namespace {

struct Workload {
  const char* name;
  Constraint constraint;
  const char* document;  // valid under the constraint
};

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> w = {
      {"json_object", Constraint::json_object(),
       R"({"title": "Notes on the Analytical Engine", "year": 1843, "pages": [1, 2, 3],
  "author": {"name": "Ada Lovelace", "alive": false}, "score": -12.5e2, "tags": ["math", "café"]})"},
      {"json_schema",
       Constraint::json_schema(R"({"type": "object", "properties": {
          "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
          "color": {"enum": ["red", "green", "blue"]},
          "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name", "age", "color", "tags"]})"),
       R"({"name": "Ada Lovelace", "age": 36, "color": "green", "tags": ["mathematician", "writer", "analyst"]})"},
  };
  return w;
}

void mask_step(benchmark::State& state, const testing::RealVocab* vocab, const Workload* w, bool apply) {
  auto compiled = vocab->compiler->compile(w->constraint);
  if (!compiled.ok()) return state.SkipWithError(compiled.status().ToString().c_str());
  auto matcher = GrammarMatcher::create(*compiled);
  if (!matcher.ok()) return state.SkipWithError(matcher.status().ToString().c_str());
  GrammarMatcher& m = **matcher;
  std::vector<int32_t> ids = vocab->tokenizer->encode(w->document, /*add_special=*/false);
  ids.push_back(*vocab->tokenizer->eos());
  TokenBitmask mask(vocab->compiler->logits_size());
  std::vector<float> logits(vocab->compiler->logits_size());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (float& x : logits) x = uniform(rng);
  size_t next = 0;
  for (auto _ : state) {
    if (next == ids.size()) {
      m.reset();
      next = 0;
    }
    auto ruled_out = m.fill_next_token_mask(mask);
    if (!ruled_out.ok()) return state.SkipWithError(ruled_out.status().ToString().c_str());
    if (apply) apply_token_bitmask(mask, logits);
    if (Status s = m.accept_token(ids[next++]); !s.ok()) return state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetItemsProcessed(state.iterations());  // tokens
  state.counters["vocab"] = static_cast<double>(vocab->compiler->logits_size());
}

void compile_schema(benchmark::State& state, const testing::RealVocab* vocab) {
  int n = 0;
  for (auto _ : state) {
    // A schema no other iteration compiled: the cache does not answer.
    const std::string schema = R"({"type": "object", "properties": {"p)" + std::to_string(n++) +
                               R"(": {"type": "integer"}, "s": {"type": "string"}}, "required": ["s"]})";
    auto compiled = vocab->compiler->compile(Constraint::json_schema(schema));
    if (!compiled.ok()) return state.SkipWithError(compiled.status().ToString().c_str());
  }
}

// Registers the benchmarks of the models that load; false when none can run.
bool register_benchmarks() {
  if (!structured_output_available()) {
    std::printf("bench_grammar_mask: this build has no grammar engine (tests/install-xgrammar.sh); nothing to run\n");
    return false;
  }
  for (const char* model : {"smollm2", "gemma3"}) {
    std::string skip, error;
    const testing::RealVocab* vocab = testing::real_vocab(model, &skip, &error);
    if (!skip.empty()) {
      std::printf("bench_grammar_mask: %s\n", skip.c_str());
      return false;
    }
    if (!vocab) {
      std::fprintf(stderr, "bench_grammar_mask: %s\n", error.c_str());
      std::exit(1);
    }
    for (const Workload& w : workloads()) {
      const std::string base = std::string(model) + "/" + w.name;
      benchmark::RegisterBenchmark((base + "/fill_accept").c_str(), mask_step, vocab, &w, false)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark((base + "/fill_apply_accept").c_str(), mask_step, vocab, &w, true)
          ->Unit(benchmark::kMicrosecond);
    }
    benchmark::RegisterBenchmark((std::string(model) + "/compile_new_schema").c_str(), compile_schema, vocab)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}

}  // namespace
}  // namespace layerstream::grammar

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!layerstream::grammar::register_benchmarks()) return 0;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

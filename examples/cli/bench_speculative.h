// `bench --draft MODEL | --lookup`: the same generation with and without
// speculative decoding, side by side in one run (alternating rounds on one
// model), with tokens per pass, acceptance per depth and decode tokens/s.
// With --draft-branches > 1 the chain at the same --draft-max runs too, so
// the tree's tokens per pass compare with the chain's.
#pragma once

#include <string>

#include "examples/cli/speculative_flags.h"
#include "layerstream/layerstream.h"

namespace layerstream::cli {

struct SpeculativeBenchOptions {
  std::string model_path;
  ModelOptions model;        // budgets, backend, link, context
  SpeculativeFlags spec;
  std::string prompt;        // text
  int tokens = 64;           // generated per round (greedy, past end-of-generation)
  int rounds = 3;            // each of plain and speculative
  std::string json;          // write the result here when not empty
};

// Prints the comparison; returns the exit code (tokens that differ from
// plain decoding are an error).
int run_speculative_bench(const SpeculativeBenchOptions& o);

}  // namespace layerstream::cli

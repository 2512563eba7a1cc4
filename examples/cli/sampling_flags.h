// The sampling flags of the commands that generate (run), declared once so
// their names and help read the same everywhere, and checked by the
// library's validate_sampling with the error naming the flag.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "layerstream/sampler.h"
#include "layerstream/structured_output.h"
#include "layerstream/status.h"

namespace layerstream::cli {

struct SamplingFlags {
  SamplingOptions options;
  std::vector<std::string> logit_bias;  // TOKEN+BIAS / TOKEN-BIAS / TOKEN-inf, as llama.cpp's -l
  std::string json_schema_file, grammar_file;  // --json-schema FILE, --grammar FILE
  StructuredOutput structured;                 // from them, by resolve()
  // --temp, --top-k, --top-p, --min-p, --typical-p, --repeat-penalty,
  // --repeat-last-n, --presence-penalty, --frequency-penalty, -l/--logit-bias, --seed,
  // --json-schema, --grammar.
  void add_to(CLI::App& sub);
  // Parses --logit-bias into `options`, reads --json-schema / --grammar into
  // `structured` (at most one; the library compiles them) and checks every value;
  // InvalidArgument naming the flag otherwise. `n_vocab` > 0 checks token ids.
  Status resolve(int n_vocab = 0);
};

}  // namespace layerstream::cli

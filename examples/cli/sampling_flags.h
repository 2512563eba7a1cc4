// The sampling flags of the commands that generate (run), declared once so
// their names and help read the same everywhere, and checked by the
// library's validate_sampling with the error naming the flag.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "layerstream/sampler.h"
#include "layerstream/status.h"

namespace layerstream::cli {

struct SamplingFlags {
  SamplingOptions options;
  std::vector<std::string> logit_bias;  // TOKEN+BIAS / TOKEN-BIAS / TOKEN-inf, as llama.cpp's -l
  // --temp, --top-k, --top-p, --min-p, --typical-p, --repeat-penalty,
  // --repeat-last-n, --presence-penalty, --frequency-penalty, -l/--logit-bias, --seed.
  void add_to(CLI::App& sub);
  // Parses --logit-bias into `options` and checks every value;
  // InvalidArgument naming the flag otherwise. `n_vocab` > 0 checks token ids.
  Status resolve(int n_vocab = 0);
};

}  // namespace layerstream::cli

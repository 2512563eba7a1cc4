// The speculative-decoding flags of `run` and `bench` (--draft MODEL,
// --lookup, --draft-max N, --draft-branches N), the draft source they ask for, and how the
// figures read (text and JSON).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "layerstream/layerstream.h"

namespace layerstream::cli {

struct SpeculativeFlags {
  std::string draft_model;  // --draft
  bool lookup = false;      // --lookup
  int draft_max = kMaxDraftTokens;
  bool fixed = false;       // --draft-fixed: always draft_max
  int branches = 1;         // --draft-branches: most branches of a draft tree (1: a chain)
  void add_to(CLI::App& sub);
  bool any() const { return lookup || !draft_model.empty(); }
  // The source the flags ask for (null: none). A draft model opens with the
  // target's backend, threads, link and exactness, all of it resident.
  // InvalidArgument for both flags at once or a draft_max out of range.
  Result<std::shared_ptr<DraftSource>> open(const Model& target) const;
  // GenerateOptions::speculative for `draft`.
  SpeculativeOptions options(std::shared_ptr<DraftSource> draft) const;
  // KV sequences the target's pool needs beyond the contexts' own: one per
  // side branch of a tree.
  int extra_sequences() const { return any() ? branches - 1 : 0; }
};

// "speculative: 3.41 tokens/pass over 12 passes, 38/51 drafts kept (75%);
// kept per depth 1:92% 2:80% ...; draft 0.12 s"
std::string format_speculative(const SpeculativeStats& s);
nlohmann::json speculative_json(const SpeculativeStats& s);

}  // namespace layerstream::cli

// Speculative-decoding flags and figures shared by `run` and `bench`.
#include "examples/cli/speculative_flags.h"

#include <fmt/format.h>

#include "runtime/core/status_macros.h"

namespace layerstream::cli {

void SpeculativeFlags::add_to(CLI::App& sub) {
  sub.add_option("--draft", draft_model,
                 "Speculative decoding with this draft model (same vocabulary; e.g. the model quantised lower)");
  sub.add_flag("--lookup", lookup, "Speculative decoding with n-gram prompt lookup drafts (no draft model)");
  sub.add_option("--draft-max", draft_max,
                 "Most drafted tokens per pass (1.." + std::to_string(kMaxDraftTokens) +
                     "); each pass drafts what the measured costs say pays")
      ->capture_default_str();
  sub.add_flag("--draft-fixed", fixed,
               "Draft --draft-max tokens every pass (no choice from measured costs; a tree: shaped by the "
               "measured acceptance)");
  sub.add_option("--draft-branches", branches,
                 "Most branches of a draft tree (1.." + std::to_string(kMaxDraftBranches) +
                     "; 1: a chain); each side branch repeats the sampled token, so --draft-max + branches <= " +
                     std::to_string(kMaxDraftTokens + 1))
      ->capture_default_str();
}

SpeculativeOptions SpeculativeFlags::options(std::shared_ptr<DraftSource> draft) const {
  SpeculativeOptions o;
  o.draft = std::move(draft);
  o.draft_max = draft_max;
  o.adaptive = !fixed;
  o.branches = branches;
  return o;
}

Result<std::shared_ptr<DraftSource>> SpeculativeFlags::open(const Model& target) const {
  if (lookup && !draft_model.empty()) return Status::InvalidArgument("give one of --draft MODEL or --lookup");
  if (draft_max < 1 || draft_max > kMaxDraftTokens)
    return Status::InvalidArgument("--draft-max must be in [1, " + std::to_string(kMaxDraftTokens) + "]");
  if (branches < 1 || branches > kMaxDraftBranches)
    return Status::InvalidArgument("--draft-branches must be in [1, " + std::to_string(kMaxDraftBranches) + "]");
  if (draft_max + branches > kMaxDraftTokens + 1)
    return Status::InvalidArgument("--draft-max + --draft-branches must be at most " +
                                   std::to_string(kMaxDraftTokens + 1) + " (a verification pass carries the drafts "
                                   "and the sampled token once per branch)");
  if (lookup) {
    LS_ASSIGN_OR_RETURN(std::unique_ptr<DraftSource> s, make_lookup_draft());
    return std::shared_ptr<DraftSource>(std::move(s));
  }
  if (draft_model.empty()) return std::shared_ptr<DraftSource>();
  const ModelOptions& t = target.options();
  ModelOptions o;
  o.backend = t.backend;
  o.host_threads = t.host_threads;
  o.sim_link_gbps = t.sim_link_gbps;
  o.exact = t.exact;
  o.context = target.n_context();
  o.strategy = Strategy::kResident;
  auto draft = Model::open(draft_model, o);
  if (!draft.ok()) return draft.status().WithContext("--draft " + draft_model);
  LS_ASSIGN_OR_RETURN(std::unique_ptr<DraftSource> s, make_model_draft(*draft, target));
  return std::shared_ptr<DraftSource>(std::move(s));
}

std::string format_speculative(const SpeculativeStats& s) {
  std::string depth;
  for (size_t d = 0; d < s.drafted_at_depth.size() && s.drafted_at_depth[d] > 0; ++d)
    depth += fmt::format(" {}:{:.0f}%", d + 1, 100.0 * s.accepted_at_depth[d] / s.drafted_at_depth[d]);
  const std::string tree =
      s.mean_branches() > 1 ? fmt::format("{:.2f} branches and {:.2f} tokens carried per pass, {} passes kept a side "
                                          "branch; ",
                                          s.mean_branches(), double(s.pass_tokens) / s.passes, s.side_branch_kept)
                            : "";
  return fmt::format("speculative: {:.2f} tokens/pass over {} passes, {:.2f} drafts asked per pass, {}{}/{} drafts kept "
                     "({:.0f}%); kept per depth{}; draft {:.3f} s\n",
                     s.tokens_per_pass(), s.passes, s.mean_draft_length(), tree, s.accepted, s.drafted,
                     100 * s.acceptance(), depth.empty() ? " -" : depth, s.draft_s);
}

nlohmann::json speculative_json(const SpeculativeStats& s) {
  std::vector<double> rate;
  for (size_t d = 0; d < s.drafted_at_depth.size(); ++d)
    rate.push_back(s.drafted_at_depth[d] ? double(s.accepted_at_depth[d]) / s.drafted_at_depth[d] : 0.0);
  return {{"passes", s.passes},
          {"tokens", s.tokens},
          {"tokens_per_pass", s.tokens_per_pass()},
          {"drafted", s.drafted},
          {"accepted", s.accepted},
          {"acceptance", s.acceptance()},
          {"drafted_at_depth", s.drafted_at_depth},
          {"accepted_at_depth", s.accepted_at_depth},
          {"acceptance_at_depth", rate},
          {"mean_draft_length", s.mean_draft_length()},
          {"mean_branches", s.mean_branches()},
          {"pass_tokens", s.pass_tokens},
          {"side_branch_kept", s.side_branch_kept},
          {"draft_s", s.draft_s}};
}

}  // namespace layerstream::cli

// `layerstream`: run, inspect and benchmark models larger than GPU memory.
// Each subcommand lives in cmd_<name>.cpp and registers itself.
#include <algorithm>
#include <iostream>

#include "examples/cli/cli_common.h"
#include "layerstream/config.h"
#include "layerstream/log.h"

int main(int argc, char** argv) {
  using namespace layerstream;
  CLI::App app{"layerstream " LAYERSTREAM_VERSION
               ": run transformer models larger than GPU memory by streaming layers"};
  app.require_subcommand(1);
  std::string log_level = "info";
  CLI::Option* log_opt = app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
                             ->capture_default_str();
  // Options of the main command are also accepted after the subcommand
  // (`layerstream run MODEL --log-level debug`).
  app.fallthrough();
  app.set_version_flag("--version", LAYERSTREAM_VERSION);

  auto& registry = cli::command_registry();
  std::sort(registry.begin(), registry.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, std::unique_ptr<cli::Command>>> commands;
  for (const auto& spec : registry) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.description);
    auto cmd = spec.make();
    cmd->setup(*sub);
    commands.emplace_back(sub, std::move(cmd));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return cli::kExitUsage;
  }
  if (Status s = set_log_level(log_level); !s.ok()) return cli::usage_error(s.message());
  cli::set_log_level_given(log_opt->count() > 0);
  for (auto& [sub, cmd] : commands) {
    if (sub->parsed()) return cmd->run();
  }
  return cli::kExitUsage;
}

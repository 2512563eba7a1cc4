// A minimal app on the public API: route the library's logs, open a model on
// memory budgets, generate with a per-token callback, continue the
// conversation, print the stats, and stop a decode with the abort callback.
//   embed MODEL.gguf [PROMPT] [VRAM]     e.g. embed model.gguf "Hello" 512MiB
//   embed --self-test                    writes a tiny example model and runs it
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "layerstream/layerstream.h"
#include "layerstream/units.h"

namespace ls = layerstream;

static int run(const std::string& path, const std::string& prompt, uint64_t vram, bool self_test) {
  int log_lines = 0;  // the library's log lines come to the app, not stderr
  ls::set_log_sink([&](ls::LogLevel, std::string_view line) {
    std::fprintf(stderr, "[layerstream] %.*s\n", static_cast<int>(line.size()), line.data());
    ++log_lines;
  });
  ls::ModelOptions mo;
  mo.vram_budget = vram;
  mo.ram_budget = vram / 2;
  mo.context = 256;
  auto model = ls::Model::open(path, mo);
  if (!model.ok()) return std::fprintf(stderr, "error: %s\n", model.status().ToString().c_str()), 1;
  bool stop = false;  // e.g. set by a UI's Stop button
  ls::ContextOptions co;
  co.abort_callback = [&] { return stop; };
  auto context = (*model)->create_context(co);
  if (!context.ok()) return std::fprintf(stderr, "error: %s\n", context.status().ToString().c_str()), 1;

  ls::GenerateOptions go;
  go.max_tokens = 16;
  go.sampling.temperature = 0;  // greedy: the same text every run
  go.stop_at_eog = !self_test;
  auto print = [](const ls::TokenEvent& t) { return std::printf("%s", t.piece.c_str()), std::fflush(stdout), true; };
  std::printf("%s", prompt.c_str());
  auto first = (*context)->generate(prompt, go, print);
  if (!first.ok()) return std::fprintf(stderr, "error: %s\n", first.status().ToString().c_str()), 1;
  // The same context continues: only " And then" (and the last token) is new.
  std::printf(" And then");
  auto second = (*context)->generate(" And then", go, print);
  if (!second.ok()) return std::fprintf(stderr, "error: %s\n", second.status().ToString().c_str()), 1;
  std::printf("\n\n%s", ls::format_stats(second->stats).c_str());
  const ls::Stats& s = second->stats;
  stop = true;
  auto third = (*context)->generate(" Stop", go, print);
  ls::set_log_sink(nullptr);
  if (self_test && (s.generated_tokens != go.max_tokens || s.layers_disk + s.layers_ram == 0 ||
                    s.prompt_tokens >= (*context)->position(0) - go.max_tokens || third.ok() ||
                    !third.status().IsCancelled() || log_lines == 0)) {
    std::fprintf(stderr, "self-test failed: %d tokens, nothing streamed, the second turn prefilled everything, "
                 "the abort callback was ignored, or no log line reached the sink\n", s.generated_tokens);
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--self-test") == 0) {
    const auto dir = std::filesystem::temp_directory_path() / ("layerstream-embed-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "tiny.gguf").string();
    ls::Status st = ls::make_example_model(path);
    int rc = st.ok() ? run(path, "Hello", 3ull << 20, true) : (std::fprintf(stderr, "error: %s\n", st.ToString().c_str()), 1);
    std::filesystem::remove_all(dir);
    return rc;
  }
  if (argc < 2) return std::fprintf(stderr, "usage: embed MODEL.gguf [PROMPT] [VRAM] | embed --self-test\n"), 2;
  uint64_t vram = 0;
  if (argc > 3) {
    auto v = ls::parse_size(argv[3]);
    if (!v.ok()) return std::fprintf(stderr, "error: %s\n", v.status().ToString().c_str()), 2;
    vram = *v;
  }
  return run(argv[1], argc > 2 ? argv[2] : "Once upon a time", vram, false);
}

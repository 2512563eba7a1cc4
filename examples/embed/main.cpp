// A minimal app on the public API: open a model on memory budgets, generate
// with a per-token callback, print the stats.
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
  ls::ModelOptions mo;
  mo.vram_budget = vram;
  mo.ram_budget = vram / 2;
  mo.context = 256;
  auto model = ls::Model::open(path, mo);
  if (!model.ok()) return std::fprintf(stderr, "error: %s\n", model.status().ToString().c_str()), 1;
  auto session = (*model)->create_session();
  if (!session.ok()) return std::fprintf(stderr, "error: %s\n", session.status().ToString().c_str()), 1;

  ls::GenerateOptions go;
  go.max_tokens = 16;
  go.temperature = 0;  // greedy: the same text every run
  go.stop_at_eog = !self_test;
  int tokens = 0;
  std::printf("%s", prompt.c_str());
  auto result = (*session)->generate(prompt, go, [&](const ls::TokenEvent& t) {
    ++tokens;
    std::printf("%s", t.piece.c_str());
    std::fflush(stdout);
    return true;
  });
  if (!result.ok()) return std::fprintf(stderr, "error: %s\n", result.status().ToString().c_str()), 1;
  std::printf("\n\n%s", ls::format_stats(result->stats).c_str());
  if (self_test && (tokens != go.max_tokens || result->stats.layers_disk + result->stats.layers_ram == 0)) {
    std::fprintf(stderr, "self-test failed: %d tokens, nothing streamed?\n", tokens);
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

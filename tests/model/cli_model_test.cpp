// Integration: the `layerstream` CLI writes a small example model, inspects
// it (JSON checked against the request), and fails cleanly on bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/common/cli.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

using testing::CliResult;

// stdout and stderr together: the checks below look for messages in either.
CliResult run_cli(const std::string& args) { return testing::run_cli(args, testing::CliStderr::kMerged); }

nlohmann::json load_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

TEST(CliModel, ExampleModelThenInspectJson) {
  testing::TempDir dir;
  const uint64_t seed = testing::fresh_seed() % 1000000;
  const std::string model = dir.file("tiny.gguf");
  CliResult w = run_cli("example-model " + model +
                        " --layers 3 --hidden 128 --ffn 352 --heads 4 --kv-heads 2 --vocab 700 --ctx 1024"
                        " --dtype q8_0 --seed " + std::to_string(seed) + " --json " + dir.file("gen.json"));
  ASSERT_EQ(w.exit_code, 0) << w.out;
  EXPECT_NE(w.out.find("wrote " + model), std::string::npos) << w.out;
  EXPECT_FALSE(std::filesystem::exists(model + ".tmp"));
  const auto gen = load_json(dir.file("gen.json"));
  EXPECT_EQ(gen["bytes"].get<uint64_t>(), std::filesystem::file_size(model));

  CliResult r = run_cli("inspect " + model + " --json " + dir.file("inspect.json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("architecture:  llama"), std::string::npos) << r.out;
  const auto j = load_json(dir.file("inspect.json"));
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["alignment"], 4096);
  EXPECT_EQ(j["file_bytes"].get<uint64_t>(), std::filesystem::file_size(model));
  EXPECT_EQ(j["hparams"]["n_layers"], 3);
  EXPECT_EQ(j["hparams"]["n_embd"], 128);
  EXPECT_EQ(j["hparams"]["n_ff"], 352);
  EXPECT_EQ(j["hparams"]["n_head"], 4);
  EXPECT_EQ(j["hparams"]["n_head_kv"], 2);
  EXPECT_EQ(j["hparams"]["n_vocab"], 700);
  EXPECT_EQ(j["hparams"]["n_ctx_train"], 1024);
  EXPECT_EQ(j["tokenizer"]["model"], "llama");
  EXPECT_EQ(j["tokenizer"]["tokens"], 700);
  EXPECT_EQ(j["tensor_types"]["Q8_0"]["count"], 2 + 3 * 7);
  EXPECT_EQ(j["tensor_types"]["F32"]["count"], 1 + 3 * 2);
  ASSERT_EQ(j["layers"].size(), 5u);
  EXPECT_EQ(j["layers"][0]["name"], "embedding");
  EXPECT_EQ(j["layers"][4]["name"], "head");
  uint64_t sum = 0;
  for (const auto& l : j["layers"]) {
    sum += l["tensor_bytes"].get<uint64_t>();
    EXPECT_EQ(l["aligned_begin"].get<uint64_t>() % 4096, 0u);
    EXPECT_LE(l["span_end"].get<uint64_t>(), j["file_bytes"].get<uint64_t>());
  }
  EXPECT_EQ(sum, j["total_tensor_bytes"].get<uint64_t>());
}

// A mixture of experts written and inspected: the experts' count, used count
// and bytes per expert (one expert's gate, up and down slices of Q8_0 rows).
TEST(CliModel, ExampleMoeModelThenInspectShowsExperts) {
  testing::TempDir dir;
  const std::string model = dir.file("moe.gguf");
  CliResult w = run_cli("example-model " + model +
                        " --arch qwen3moe --experts 8 --experts-used 2 --layers 2 --hidden 64 --ffn 96 --heads 4"
                        " --kv-heads 2 --vocab 512 --ctx 256 --dtype q8_0");
  ASSERT_EQ(w.exit_code, 0) << w.out;
  EXPECT_NE(w.out.find("8 experts (2 used)"), std::string::npos) << w.out;
  CliResult r = run_cli("inspect " + model + " --json " + dir.file("inspect.json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const uint64_t per_expert = 2 * 96 * 68 + 64 * 102;  // gate, up: 96 rows of 64 (68 B); down: 64 rows of 96 (102 B)
  EXPECT_NE(r.out.find("experts:       8 per block, 2 used per token, width 96"), std::string::npos) << r.out;
  const auto j = load_json(dir.file("inspect.json"));
  EXPECT_EQ(j["architecture"], "qwen3moe");
  EXPECT_EQ(j["experts"]["count"], 8);
  EXPECT_EQ(j["experts"]["used"], 2);
  EXPECT_EQ(j["experts"]["n_ff_exp"], 96);
  ASSERT_EQ(j["experts"]["bytes_per_expert"].size(), 2u);
  EXPECT_EQ(j["experts"]["bytes_per_expert"][1].get<uint64_t>(), per_expert);
  // Bad expert counts are usage errors naming the flag's rule.
  CliResult bad = run_cli("example-model " + dir.file("bad.gguf") + " --arch mixtral --experts 4 --experts-used 5");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("experts-used = 5 must be in 1..4"), std::string::npos) << bad.out;
}

TEST(CliModel, SizeFlagLandsWithinFivePercent) {
  testing::TempDir dir;
  const std::string model = dir.file("sized.gguf");
  ASSERT_TRUE(testing::cli_example_model(model, "--size 6MiB --dtype q4_0"));
  const double size = static_cast<double>(std::filesystem::file_size(model));
  EXPECT_NEAR(size, 6.0 * (1 << 20), 0.05 * 6.0 * (1 << 20));
  EXPECT_EQ(run_cli("inspect " + model).exit_code, 0);
}

TEST(CliModel, ErrorsExitOneWithAMessage) {
  testing::TempDir dir;
  std::mt19937_64 rng(testing::fresh_seed());
  testing::write_file(dir.file("junk.gguf"), testing::random_bytes(1000, rng));
  CliResult r = run_cli("inspect " + dir.file("junk.gguf"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("error: "), std::string::npos);
  EXPECT_NE(r.out.find("bad magic"), std::string::npos) << r.out;

  r = run_cli("inspect " + dir.file("absent.gguf"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("absent.gguf"), std::string::npos) << r.out;

  r = run_cli("example-model " + dir.file("x.gguf") + " --heads 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("heads = 3"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));

  r = run_cli("example-model " + dir.file("x.gguf") + " --dtype iq2_xxs");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("unsupported tensor type IQ2_XXS (id 16)"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
}

}  // namespace
}  // namespace layerstream

namespace layerstream {
namespace {

// Sets the GGML type id of tensor `name` in the file's tensor infos.
void patch_tensor_type(const std::string& path, const std::string& name, uint32_t type) {
  std::vector<uint8_t> bytes = testing::read_file(path);
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(it, bytes.end());
  size_t at = (it - bytes.begin()) + name.size();
  uint32_t n_dims;
  std::memcpy(&n_dims, &bytes[at], 4);
  at += 4 + 8 * n_dims;
  std::memcpy(&bytes[at], &type, 4);
  testing::write_file(path, bytes);
}

// Must-show: a well-formed file with a tensor type layerstream does not
// compute with is shown by inspect (exit 0, the type named as unsupported);
// run refuses it with the reason.
TEST(CliModel, InspectShowsUnsupportedTypesRunRefuses) {
  testing::TempDir dir;
  const std::string model = dir.file("m.gguf");
  ASSERT_TRUE(testing::cli_example_model(
      model, "--layers 2 --hidden 256 --ffn 512 --heads 4 --kv-heads 2 --vocab 512 --dtype f32"));
  // F32 (4 bytes per element) -> IQ2_XXS (66 bytes per 256): the data still lies inside the old span.
  patch_tensor_type(model, "blk.1.attn_q.weight", 16);

  CliResult r = run_cli("inspect " + model + " --json " + dir.file("i.json"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("IQ2_XXS x1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unsupported:   tensor types IQ2_XXS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runnable:      no:"), std::string::npos) << r.out;
  const auto j = load_json(dir.file("i.json"));
  EXPECT_EQ(j["runnable"], false);
  EXPECT_EQ(j["unsupported_tensor_types"], nlohmann::json::array({"IQ2_XXS"}));
  EXPECT_EQ(j["tensor_types"]["IQ2_XXS"]["count"], 1);

  CliResult run = run_cli("run " + model + " -p hi -n 1 --backend host");
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("unsupported tensor type IQ2_XXS (id 16)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("blk.1.attn_q.weight"), std::string::npos) << run.out;
}

// An unsupported architecture: inspect shows the file and the reason, exit 0.
TEST(CliModel, InspectShowsUnsupportedArchitecture) {
  testing::TempDir dir;
  const std::string model = dir.file("m.gguf");
  ASSERT_TRUE(testing::cli_example_model(
      model, "--layers 2 --hidden 64 --ffn 128 --heads 2 --kv-heads 2 --vocab 512 --dtype q5_0"));
  std::vector<uint8_t> bytes = testing::read_file(model);
  const std::string from = "llama.", to = "llamb.";  // every llama.* key: not a llama model any more
  const std::string arch_key = "general.architecture";
  auto it = std::search(bytes.begin(), bytes.end(), arch_key.begin(), arch_key.end());
  ASSERT_NE(it, bytes.end());
  // the value: u32 type (8 = string), u64 length 5, "llama"
  const size_t at = (it - bytes.begin()) + arch_key.size() + 4 + 8;
  ASSERT_EQ(std::string(bytes.begin() + at, bytes.begin() + at + 5), "llama");
  bytes[at + 4] = 'x';  // "llamx"
  testing::write_file(model, bytes);
  CliResult r = run_cli("inspect " + model);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("architecture:  llamx"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runnable:      no:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("architecture 'llamx' is not supported"), std::string::npos) << r.out;
  CliResult run = run_cli("run " + model + " -p hi -n 1 --backend host");
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("architecture 'llamx' is not supported"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace layerstream

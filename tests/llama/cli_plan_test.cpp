// `layerstream plan` end to end, and the terminal hygiene of `run`:
//  - plan --box: the JSON keys; its minimum budget runs, one byte less fails
//    with the error that names the minimum and what fits; the all-resident
//    budget holds every layer with --strategy resident;
//  - plan --replicas N: the budgets divided, the aggregate, what N fits;
//  - run at the default log level: no log line inside the generated text
//    (stderr merged into stdout, as on a terminal), --log-level accepted
//    after the subcommand;
//  - example-model refuses a size larger than the free disk before writing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/common/box_json.h"
#include "tests/common/cli.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::CliResult;
using testing::CliStderr;
using testing::run_cli;
using testing::TempDir;

// A box file as `layerstream probe --json` writes it (the fields plan reads).
std::string write_box(TempDir& dir) {
  const nlohmann::json box = {
      {"probe_version", 1},
      {"link_gbps", 10.0},
      {"pageable_link_gbps", 5.0},
      {"disk_gbps", 2.0},
      {"compute",
       {{{"type", "F32"}, {"shape", "decode"}, {"n_tokens", 1}, {"weight_gbps", 8.0}, {"gflops", 4.0}},
        {{"type", "F32"}, {"shape", "prefill"}, {"n_tokens", 32}, {"weight_gbps", 40.0}, {"gflops", 20.0}}}}};
  const std::string path = dir.file("box.json");
  std::ofstream(path) << box.dump();
  return path;
}

std::string make_model(TempDir& dir, const std::string& extra = "") {
  const std::string model = dir.file("m.gguf");
  EXPECT_TRUE(testing::cli_example_model(model, "--layers 4 --hidden 64 --ffn 128 --heads 4 --kv-heads 2 --dtype f32 "
                                                "--ctx 128 --seed " + std::to_string(testing::fresh_seed() % 100000) + extra));
  return model;
}

TEST(CliPlan, MinimumRunsOneByteLessFailsAllResidentHoldsEverything) {
  TempDir dir;
  const std::string model = make_model(dir), box = write_box(dir), json = dir.file("plan.json");
  CliResult p = run_cli("plan " + model + " --box " + box + " --ctx 64 --backend host --json " + json);
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  EXPECT_THAT(p.out, HasSubstr("minimum VRAM budget"));
  std::ifstream jf(json);
  const nlohmann::json j = nlohmann::json::parse(jf);
  const uint64_t lo = j["min_vram_bytes"], hi = j["all_resident_vram_bytes"];
  ASSERT_GT(lo, 0u);
  ASSERT_GT(hi, lo);
  ASSERT_GE(j["budgets"].size(), 2u);
  EXPECT_EQ(j["budgets"].front()["vram_bytes"], lo);
  EXPECT_EQ(j["budgets"].back()["vram_bytes"], hi);
  for (const auto& b : j["budgets"]) {
    EXPECT_TRUE(b["fits"].get<bool>());
    EXPECT_GT(b["predicted_decode_tokens_per_s"].get<double>(), 0);
    EXPECT_GT(b["predicted_prefill_tokens_per_s"].get<double>(), 0);
    EXPECT_EQ(b["ram_bytes"], 0);
  }
  // More memory never predicts slower decoding.
  EXPECT_GE(j["budgets"].back()["predicted_decode_tokens_per_s"].get<double>(),
            j["budgets"].front()["predicted_decode_tokens_per_s"].get<double>());

  const std::string run = "run " + model + " --tokens 1,2,3 -n 3 --ctx 64 --backend host ";
  CliResult at_min = run_cli(run + "--vram " + std::to_string(lo));
  EXPECT_EQ(at_min.exit_code, 0) << at_min.err;
  CliResult below = run_cli(run + "--vram " + std::to_string(lo - 1));
  EXPECT_NE(below.exit_code, 0);
  EXPECT_THAT(below.err, HasSubstr("need at least " + std::to_string(lo) + " bytes"));
  EXPECT_THAT(below.err, HasSubstr("fits context"));
  CliResult resident = run_cli(run + "--strategy resident --vram " + std::to_string(hi));
  EXPECT_EQ(resident.exit_code, 0) << resident.err;
  CliResult resident_below = run_cli(run + "--strategy resident --vram " + std::to_string(hi - 1));
  EXPECT_NE(resident_below.exit_code, 0);

  // One budget: --vram answers for it; below the minimum it says so.
  CliResult one = run_cli("plan " + model + " --box " + box + " --ctx 64 --backend host --vram " +
                          std::to_string(lo - 1));
  EXPECT_NE(one.exit_code, 0);
  EXPECT_THAT(one.err, HasSubstr("below the minimum"));
}

// --replicas N divides --vram and --ram: the plan is one share's, the
// aggregate is N times its prediction; a share below one replica's minimum
// fails, saying how many replicas the total holds.
TEST(CliPlan, ReplicasShareTheBudgets) {
  TempDir dir;
  const std::string model = make_model(dir), box = write_box(dir), json = dir.file("plan.json");
  const std::string plan = "plan " + model + " --box " + box + " --ctx 64 --backend host ";
  CliResult alone = run_cli(plan + "--json " + json);
  ASSERT_EQ(alone.exit_code, 0) << alone.out << alone.err;
  const uint64_t lo = nlohmann::json::parse(std::ifstream(json))["min_vram_bytes"];
  ASSERT_GT(lo, 0u);
  const uint64_t ram = 3 * lo + 1;  // not a multiple of 3: each share rounds down

  CliResult three = run_cli(plan + "--replicas 3 --vram " + std::to_string(3 * lo + 2) + " --ram " +
                            std::to_string(ram) + " --json " + json);
  ASSERT_EQ(three.exit_code, 0) << three.out << three.err;
  EXPECT_THAT(three.out, HasSubstr("3 replicas, each with --vram"));
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(json));
  const nlohmann::json& r = j["replicas"];
  EXPECT_EQ(r["count"], 3);
  EXPECT_EQ(r["vram_bytes_each"], lo);
  EXPECT_EQ(r["ram_bytes_each"], lo);
  EXPECT_EQ(j["budgets"].size(), 1u);
  EXPECT_EQ(j["budgets"][0]["vram_bytes"], lo);  // the plan is one replica's share
  EXPECT_EQ(j["budgets"][0]["ram_bytes"], lo);
  const double each = j["budgets"][0]["predicted_decode_tokens_per_s"];
  EXPECT_GT(each, 0);
  EXPECT_DOUBLE_EQ(r["predicted_decode_tokens_per_s_each"].get<double>(), each);
  EXPECT_DOUBLE_EQ(r["predicted_decode_tokens_per_s_aggregate"].get<double>(), 3 * each);
  const auto& layers = j["budgets"][0]["layers"];
  EXPECT_EQ(r["streamed_layers_each"], layers["ram"].get<int>() + layers["disk"].get<int>());

  // One byte short of 3 minimum shares: 2 fit.
  CliResult short_one = run_cli(plan + "--replicas 3 --vram " + std::to_string(3 * lo - 1));
  EXPECT_NE(short_one.exit_code, 0);
  EXPECT_THAT(short_one.err, HasSubstr("below one replica's minimum"));
  EXPECT_THAT(short_one.err, HasSubstr("(" + std::to_string(lo) + " bytes)"));
  EXPECT_THAT(short_one.err, HasSubstr("at most 2 replicas of the minimum fit"));
  CliResult none = run_cli(plan + "--replicas 2 --vram " + std::to_string(lo - 1));
  EXPECT_NE(none.exit_code, 0);
  EXPECT_THAT(none.err, HasSubstr("not even one replica fits"));

  CliResult no_vram = run_cli(plan + "--replicas 2");
  EXPECT_NE(no_vram.exit_code, 0);
  EXPECT_THAT(no_vram.err, HasSubstr("--replicas needs --vram"));
  CliResult zero = run_cli(plan + "--replicas -1 --vram 1MiB");
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_THAT(zero.err, HasSubstr("--replicas must be >= 1"));
}

TEST(CliRunTerminal, NoLogLineInsideTheGeneratedText) {
  TempDir dir;
  const std::string model = make_model(dir);
  // Streaming at a small budget: the planner re-plans while decoding (info logs).
  const std::string args = "run " + model + " -p Hello -n 24 --temp 0 --ctx 64 --backend host --vram 600KiB";
  for (const std::string& level : {std::string(), std::string(" --log-level debug")}) {
    CliResult r = run_cli(args + level, CliStderr::kMerged);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const size_t start = r.out.find("\nHello"), end = r.out.find("\nprefill:");
    ASSERT_NE(start, std::string::npos) << r.out;
    ASSERT_NE(end, std::string::npos) << r.out;
    const std::string text = r.out.substr(start, end - start);
    if (level.empty()) {
      EXPECT_THAT(text, Not(HasSubstr("[info]"))) << r.out;
    } else {
      // The user's choice, accepted after the subcommand, is kept: the
      // re-plans' lines then do land inside the text (what the default avoids).
      EXPECT_THAT(text, HasSubstr("] [")) << r.out;
    }
  }
}

TEST(CliExampleModel, LargerThanTheFreeDiskIsRefusedBeforeWriting) {
  TempDir dir;
  const std::string out = dir.file("huge.gguf");
  const auto space = std::filesystem::space(dir.path());
  const uint64_t size = (space.available + (64ull << 30)) >> 30;  // GiB, beyond what is free
  CliResult r = run_cli("example-model " + out + " --size " + std::to_string(size) + "GiB --dtype q4_0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("free"));
  EXPECT_THAT(r.err, HasSubstr("the example model needs"));
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

// A model given by its shape and a box whose host reads RAM much faster than
// the link: the plan computes the non-resident blocks on the host; without
// host figures it streams them.
TEST(CliPlan, ShapeWithHostFiguresPutsBlocksOnTheHost) {
  TempDir dir;
  nlohmann::json box = testing::box_json({.device = "Some GPU",
                                          .type = "Q8_0",
                                          .link_gbps = 5.0,
                                          .disk_gbps = 2.0,
                                          .decode_gbps = 1000.0,
                                          .prefill_gflops = 100000.0,
                                          .host_threads = 8,
                                          .ram_read_gbps = 100.0,
                                          .host_decode_gbps = 80.0,
                                          .host_prefill_gmacs = 50.0});
  const std::string with_host = dir.file("host.json"), without = dir.file("nohost.json");
  std::ofstream(with_host) << box.dump();
  box.erase("host");
  std::ofstream(without) << box.dump();
  const std::string shape = "layers=8,hidden=1024,ffn=2048,heads=8,kv_heads=2,vocab=600,dtype=q8_0";
  auto placement = [&](const std::string& b) {
    const std::string json = dir.file("p.json");
    CliResult p = run_cli("plan --shape " + shape + " --box " + b + " --ctx 64 --vram 48MiB --ram 1GiB --json " + json);
    EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
    const auto j = nlohmann::json::parse(std::ifstream(json));
    EXPECT_EQ(j["model"], "shape " + shape);
    return j["budgets"][0]["placement"].get<std::string>();
  };
  const std::string h = placement(with_host), n = placement(without);
  EXPECT_NE(h.find("on the host site"), std::string::npos) << h;
  EXPECT_EQ(n.find("on the host site"), std::string::npos) << n;
  CliResult no_box = run_cli("plan --shape " + shape);
  EXPECT_NE(no_box.exit_code, 0);
  EXPECT_NE((no_box.out + no_box.err).find("--box"), std::string::npos);
}

}  // namespace
}  // namespace layerstream

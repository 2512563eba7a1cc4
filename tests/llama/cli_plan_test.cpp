// `layerstream plan` end to end, and the terminal hygiene of `run`:
//  - plan --box: the JSON keys; its minimum budget runs, one byte less fails
//    with the error that names the minimum and what fits; the all-resident
//    budget holds every layer with --strategy resident;
//  - plan --replicas N: the budgets divided, the aggregate, what N fits;
//  - run at the default log level: no log line inside the generated text
//    (stderr merged into stdout, as on a terminal), --log-level accepted
//    after the subcommand;
//  - example-model refuses a size larger than the free disk before writing;
//  - a mixture of experts (shape and file): the expert-level rows and
//    llama.cpp's --n-cpu-moe equivalent against the bytes written out.
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

// A GPU box with Q8_0 rates and host figures: the link, the host's RAM read
// and decode GB/s as given.
nlohmann::json q8_gpu_box(double link_gbps, double ram_read_gbps, double host_decode_gbps) {
  testing::HandWrittenBox b{.device = "Some GPU", .type = "Q8_0", .link_gbps = link_gbps, .disk_gbps = 2.0};
  b.decode_gbps = 1000.0;
  b.prefill_gflops = 100000.0;
  b.host_threads = 8;
  b.ram_read_gbps = ram_read_gbps;
  b.host_decode_gbps = host_decode_gbps;
  b.host_prefill_gmacs = 50.0;
  return testing::box_json(b);
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
  nlohmann::json box = q8_gpu_box(5.0, 100.0, 80.0);
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

// A mixture of experts given by its shape (Q8_0: 34 bytes per 32 weights):
// the expert sizes are the bytes written out here; per budget the resident
// experts fit beside KV, activations and the dense parts; llama.cpp's
// --n-cpu-moe N is the smallest that fits; all resident, both are the same
// placement; the expert-level choice is never slower than --n-cpu-moe.
TEST(CliPlan, MixtureOfExpertsShapePlansExperts) {
  TempDir dir;
  const nlohmann::json box = q8_gpu_box(4.0, 60.0, 40.0);
  const std::string box_path = dir.file("box.json"), json = dir.file("plan.json");
  std::ofstream(box_path) << box.dump();
  const int layers = 4, hidden = 512, ffn = 256, experts = 16, used = 2;
  const std::string shape = "arch=qwen3moe,layers=4,hidden=512,expert_ffn=256,heads=8,kv_heads=2,vocab=600,"
                            "experts=16,experts_used=2,dtype=q8_0";
  CliResult p = run_cli("plan --shape " + shape + " --box " + box_path + " --ctx 64 --budgets 7 --json " + json);
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  EXPECT_THAT(p.out, HasSubstr("--n-cpu-moe"));
  EXPECT_THAT(p.out, HasSubstr("does not place experts one by one yet"));
  const auto j = nlohmann::json::parse(std::ifstream(json));
  const uint64_t expert_bytes = 3ull * hidden * ffn / 32 * 34;
  const auto& e = j["experts"];
  EXPECT_EQ(e["count"], experts);
  EXPECT_EQ(e["used"], used);
  EXPECT_EQ(e["moe_layers"], layers);
  EXPECT_EQ(e["bytes"]["expert"], expert_bytes);
  EXPECT_EQ(e["bytes"]["all_experts"], uint64_t{layers} * experts * expert_bytes);
  EXPECT_EQ(e["active_expert_bytes_per_token"], uint64_t{layers} * used * expert_bytes);
  EXPECT_EQ(e["bytes"]["dense"].get<uint64_t>() + e["bytes"]["all_experts"].get<uint64_t>(), j["weight_bytes"]);
  const uint64_t fixed = e["min_vram_bytes"];
  EXPECT_GE(fixed, j["kv_bytes"].get<uint64_t>() + j["activation_bytes"].get<uint64_t>() + e["bytes"]["dense"].get<uint64_t>());
  auto resident_if = [&](int n) { return fixed + uint64_t(layers - n) * experts * expert_bytes; };
  bool some_partial = false;
  for (const auto& b : j["budgets"]) {
    const uint64_t vram = b["vram_bytes"];
    const auto& x = b["experts"];
    ASSERT_EQ(x["fits"].get<bool>(), vram >= fixed) << vram;
    if (!x["fits"].get<bool>()) continue;
    const uint64_t resident = x["resident_total"];
    EXPECT_EQ(x["resident_bytes"], resident * expert_bytes);
    EXPECT_LE(fixed + resident * expert_bytes, vram);
    some_partial |= resident > 0 && resident < uint64_t{layers} * experts;
    const int n = x["n_cpu_moe"]["n"];
    ASSERT_GE(n, 0);
    EXPECT_LE(resident_if(n), vram);
    if (n > 0) EXPECT_GT(resident_if(n - 1), vram);
    EXPECT_GE(x["predicted"]["decode_tokens_per_s"].get<double>(),
              x["n_cpu_moe"]["decode_tokens_per_s"].get<double>() * (1 - 1e-9));
    EXPECT_GT(x["predicted"]["prefill_tokens_per_s"].get<double>(), 0);
  }
  EXPECT_TRUE(some_partial);
  const auto& top = j["budgets"].back()["experts"];
  EXPECT_EQ(top["resident_total"], layers * experts);
  EXPECT_EQ(top["rest"], "");
  EXPECT_EQ(top["n_cpu_moe"]["n"], 0);
  EXPECT_NEAR(top["predicted"]["decode_tokens_per_s"].get<double>(), top["n_cpu_moe"]["decode_tokens_per_s"].get<double>(),
              1e-9 * top["predicted"]["decode_tokens_per_s"].get<double>());
}

// An example mixture of experts file: the same expert figures from the file
// as from its shape, and a dense model has none.
TEST(CliPlan, MixtureOfExpertsFileMatchesItsShape) {
  TempDir dir;
  const std::string model = dir.file("moe.gguf"), box = write_box(dir), a = dir.file("a.json"), b = dir.file("b.json");
  ASSERT_TRUE(testing::cli_example_model(model, "--arch qwen3moe --experts 8 --experts-used 2 --layers 2 --hidden 64 "
                                                "--ffn 64 --heads 4 --kv-heads 2 --dtype f32 --ctx 128"));
  CliResult pf = run_cli("plan " + model + " --box " + box + " --ctx 64 --backend host --vram 64MiB --json " + a);
  ASSERT_EQ(pf.exit_code, 0) << pf.out << pf.err;
  CliResult ps = run_cli("plan --shape arch=qwen3moe,experts=8,experts_used=2,layers=2,hidden=64,ffn=64,heads=4,"
                         "kv_heads=2,vocab=512,ctx=128,dtype=f32 --box " + box + " --ctx 64 --backend host --vram 64MiB --json " + b);
  ASSERT_EQ(ps.exit_code, 0) << ps.out << ps.err;
  const auto jf = nlohmann::json::parse(std::ifstream(a)), js = nlohmann::json::parse(std::ifstream(b));
  EXPECT_EQ(jf["experts"]["bytes"]["expert"], 3u * 64 * 64 * 4);
  EXPECT_EQ(jf["experts"], js["experts"]);
  EXPECT_EQ(jf["budgets"][0]["experts"]["resident_total"], 16);
  const std::string dense = make_model(dir), c = dir.file("c.json");
  ASSERT_EQ(run_cli("plan " + dense + " --box " + box + " --ctx 64 --backend host --json " + c).exit_code, 0);
  EXPECT_TRUE(nlohmann::json::parse(std::ifstream(c))["experts"].is_null());
}

}  // namespace
}  // namespace layerstream

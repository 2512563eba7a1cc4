// Integration: `layerstream probe` and `layerstream bench` on a tiny example
// model (host backend): the probe JSON works as `bench --box`; bench --json
// has every required field with sane values; the trace parses as trace-event
// JSON; the HTML report is self-contained with a timeline per strategy.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "tests/common/cli.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

// Sanity ceiling for measured overlap efficiency (see its use).
constexpr double kMaxEfficiency = 2.0;

using testing::CliResult;

// stdout and stderr together: the checks below look for messages in either.
CliResult run_cli(const std::string& args) { return testing::run_cli(args, testing::CliStderr::kMerged); }

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class BenchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    model_ = dir_->file("tiny.gguf");
    const uint64_t seed = testing::fresh_seed() % 1000000;
    CliResult w = run_cli("example-model " + model_ +
                          " --layers 6 --hidden 256 --ffn 704 --heads 4 --kv-heads 2 --vocab 600 --ctx 256"
                          " --dtype q8_0 --seed " + std::to_string(seed));
    ASSERT_EQ(w.exit_code, 0) << w.out;
  }
  static void TearDownTestSuite() { delete dir_; }
  static testing::TempDir* dir_;
  static std::string model_;
};
testing::TempDir* BenchCli::dir_ = nullptr;
std::string BenchCli::model_;

TEST_F(BenchCli, ProbeWritesAPriorThatBenchAccepts) {
  const std::string probe = dir_->file("probe.json");
  CliResult p = run_cli("probe --backend host --disk " + model_ +
                        " --disk-bytes 2MiB --seconds 0.01 --matmul 64x256 --prefill-tokens 4 --types f32,q8_0,q4_0"
                        " --host-types q8_0,q4_k --host-matmul 64x256 --host-decode-bytes 1MiB --host-prefill-tokens 4"
                        " --ram-bytes 4MiB --host-threads 2 --json " + probe);
  ASSERT_EQ(p.exit_code, 0) << p.out;
  EXPECT_NE(p.out.find("planner prior"), std::string::npos) << p.out;
  const auto j = nlohmann::json::parse(slurp(probe));
  EXPECT_EQ(j["box"]["backend"], "host");
  EXPECT_GT(j["box"]["total_memory_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(j["link_gbps"].get<double>(), 0);
  EXPECT_GT(j["pageable_link_gbps"].get<double>(), 0);
  std::set<std::string> mems;
  for (const auto& h : j["h2d"]) {
    mems.insert(h["memory"].get<std::string>());
    EXPECT_GT(h["gbps"].get<double>(), 0) << h.dump();
  }
  EXPECT_EQ(mems, (std::set<std::string>{"pinned", "pageable"}));
  ASSERT_EQ(j["disk"]["points"].size(), 3u);
  size_t measured = 0;
  for (const auto& d : j["disk"]["points"]) {
    if (d.contains("error")) continue;  // e.g. io_uring refused by this kernel
    ++measured;
    EXPECT_GT(d["bytes"].get<uint64_t>(), 0u);
    EXPECT_LE(d["bytes"].get<uint64_t>(), 2u << 20);
    EXPECT_GT(d["gbps"].get<double>(), 0);
  }
  EXPECT_GE(measured, 1u);
  EXPECT_GT(j["disk_gbps"].get<double>(), 0);
  ASSERT_EQ(j["compute"].size(), 6u);  // 3 types x (decode, prefill)
  for (const auto& c : j["compute"]) {
    EXPECT_GT(c["gflops"].get<double>(), 0) << c.dump();
    EXPECT_GT(c["weight_gbps"].get<double>(), 0) << c.dump();
    EXPECT_EQ(c["n_tokens"].get<int>(), c["shape"] == "decode" ? 1 : 4);
  }
  // The host site's figures: RAM read bandwidth and the CPU rates per type, with the threads used.
  ASSERT_TRUE(j.contains("host")) << j.dump();
  EXPECT_EQ(j["probe_version"].get<int>(), 2);
  EXPECT_EQ(j["host"]["threads"].get<int>(), 2);
  EXPECT_GT(j["host"]["ram_read_gbps"].get<double>(), 0);
  EXPECT_EQ(j["host"]["ram_read_bytes"].get<uint64_t>(), 4u << 20);
  ASSERT_EQ(j["host"]["compute"].size(), 4u);  // 2 types x (decode, prefill)
  for (const auto& c : j["host"]["compute"]) {
    EXPECT_GT(c["weight_gbps"].get<double>(), 0) << c.dump();
    EXPECT_NEAR(c["gmacs"].get<double>(), c["gflops"].get<double>() / 2, 1e-9 * c["gflops"].get<double>());
    EXPECT_EQ(c["n_in"].get<int>(), 256);
    if (c["shape"] == "decode") {  // about 1 MiB of weights
      EXPECT_EQ(c["n_tokens"].get<int>(), 1);
      EXPECT_NEAR(c["weight_bytes"].get<double>(), 1 << 20, 64 * 1024) << c.dump();
    } else {
      EXPECT_EQ(c["n_tokens"].get<int>(), 4);
      EXPECT_EQ(c["n_out"].get<int>(), 64);
    }
  }

  // The prior seeds bench's link and disk rates (decode, a budget that holds everything: resident runs).
  const std::string out = dir_->file("b0.json");
  CliResult b = run_cli("bench " + model_ + " --backend host --vram 64MiB --passes 2 --warmup 1 --box " + probe +
                        " --json " + out);
  ASSERT_EQ(b.exit_code, 0) << b.out;
  const auto r = nlohmann::json::parse(slurp(out));
  EXPECT_DOUBLE_EQ(r["box"]["link_gbps"].get<double>(), j["link_gbps"].get<double>());
  EXPECT_NE(r["box"]["link_source"].get<std::string>().find(probe), std::string::npos);
  EXPECT_FALSE(r["strategies"][0]["skipped"].get<bool>()) << r["strategies"][0].dump();  // resident fits 64 MiB
  // The profile is this machine's: the strategies ran, and its prediction sits next to the measured medians.
  EXPECT_NE(b.out.find("prediction from box file"), std::string::npos) << b.out;
  ASSERT_TRUE(r.contains("prediction")) << r.dump();
  ASSERT_EQ(r["prediction"]["strategies"].size(), r["strategies"].size());
  for (const auto& s : r["prediction"]["strategies"]) {
    SCOPED_TRACE(s.dump());
    EXPECT_GT(s["predicted_pass_s"].get<double>(), 0);
    EXPECT_GT(s["measured_median_s"].get<double>(), 0);
  }
}

// A hand-written profile of a GPU box and a model given by its shape: bench
// predicts each strategy (sites, pass times) and runs nothing.
TEST_F(BenchCli, ShapeAndOtherBoxPredictWithoutRunning) {
  const std::string box = dir_->file("gpu-box.json");
  {
    std::ofstream f(box);
    f << R"({"probe_version": 2, "notes": "hand-written",
             "box": {"backend": "cuda", "device": "Some GPU"}, "link_gbps": 25, "disk_gbps": 3,
             "compute": [{"type": "Q8_0", "shape": "decode", "weight_gbps": 1000},
                         {"type": "Q8_0", "shape": "prefill", "gflops": 100000}],
             "host": {"threads": 8, "ram_read_gbps": 80,
                      "compute": [{"type": "Q8_0", "shape": "decode", "weight_gbps": 60},
                                  {"type": "Q8_0", "shape": "prefill", "gmacs": 100}]}})";
  }
  const std::string shape = "layers=6,hidden=1024,ffn=2048,heads=8,kv_heads=2,vocab=600,dtype=q8_0";
  const std::string out = dir_->file("pred.json");
  CliResult b = run_cli("bench --shape " + shape + " --box " + box +
                        " --vram 40MiB --ram 1GiB --strategies overlap,host,serial,planned --json " + out);
  ASSERT_EQ(b.exit_code, 0) << b.out;
  EXPECT_NE(b.out.find("not running (--shape"), std::string::npos) << b.out;
  const auto j = nlohmann::json::parse(slurp(out));
  ASSERT_EQ(j["prediction"]["strategies"].size(), 4u) << j.dump();
  EXPECT_EQ(j["prediction"]["model"]["layers"].get<int>(), 7);  // 6 blocks + head
  for (const auto& s : j["prediction"]["strategies"]) {
    SCOPED_TRACE(s.dump());
    EXPECT_GT(s["predicted_pass_s"].get<double>(), 0);
    EXPECT_EQ(s["sites"].get<std::string>().size(), 7u);
  }
  // The same box with this machine's model file: another box's profile, nothing runs either.
  CliResult m = run_cli("bench " + model_ + " --box " + box + " --vram 16MiB --strategies overlap,planned");
  ASSERT_EQ(m.exit_code, 0) << m.out;
  EXPECT_NE(m.out.find("the profile describes Some GPU"), std::string::npos) << m.out;
  // Bad uses say what is missing.
  CliResult no_box = run_cli("bench --shape " + shape);
  EXPECT_NE(no_box.exit_code, 0);
  EXPECT_NE(no_box.out.find("--box"), std::string::npos) << no_box.out;
  CliResult both = run_cli("bench " + model_ + " --shape " + shape + " --box " + box);
  EXPECT_NE(both.exit_code, 0);
  CliResult bad = run_cli("bench --shape layers=x --box " + box);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("layers=x"), std::string::npos) << bad.out;
}

void check_bench_outputs(const std::string& json_path, const std::string& trace_path, const std::string& report_path,
                         const std::string& mode, int tokens_per_pass) {
  const auto j = nlohmann::json::parse(slurp(json_path));
  for (const char* k : {"box", "model", "budget", "strategies", "lower_bound_ms", "predicted_ms", "overlap_efficiency"})
    ASSERT_TRUE(j.contains(k)) << k;
  for (const char* k : {"backend", "device", "link_gbps", "disk_gbps"}) EXPECT_TRUE(j["box"].contains(k)) << k;
  EXPECT_EQ(j["box"]["backend"], "host");
  EXPECT_GT(j["model"]["bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["model"]["layers"].get<int>(), 8);  // embedding + 6 blocks + head
  EXPECT_EQ(j["workload"]["mode"], mode);
  EXPECT_EQ(j["workload"]["tokens_per_pass"].get<int>(), tokens_per_pass);
  ASSERT_EQ(j["strategies"].size(), 4u);
  EXPECT_EQ(j["strategies"][0]["name"], "resident");
  EXPECT_TRUE(j["strategies"][0]["skipped"].get<bool>());  // vram is below the model
  EXPECT_FALSE(j["strategies"][0]["skip_reason"].get<std::string>().empty());
  double best = 1e300;
  for (const auto& s : j["strategies"])
    if (!s["skipped"].get<bool>()) best = std::min(best, s["pass_ms"]["median"].get<double>());
  for (size_t i = 1; i < 4; ++i) {
    const auto& s = j["strategies"][i];
    SCOPED_TRACE(s["name"].get<std::string>());
    ASSERT_FALSE(s["skipped"].get<bool>());
    for (const char* k : {"name", "pass_ms", "tokens_per_s", "stall_ms", "streamed_bytes"}) ASSERT_TRUE(s.contains(k)) << k;
    const double mn = s["pass_ms"]["min"], med = s["pass_ms"]["median"], mx = s["pass_ms"]["max"];
    EXPECT_GT(mn, 0);
    EXPECT_LE(mn, med);
    EXPECT_LE(med, mx);
    EXPECT_NEAR(s["tokens_per_s"].get<double>(), tokens_per_pass / (med * 1e-3), 1e-6 * s["tokens_per_s"].get<double>());
    EXPECT_GE(s["stall_ms"].get<double>(), 0);
    // Nothing fits resident entirely: the plan streams blocks or (planned,
    // choosing sites) computes them on the host from the file. The layers
    // are the plan after the last pass (a re-plan may follow it), so the
    // check is on the plan, not on one pass's streamed bytes.
    int not_resident = 0;
    for (const auto& l : s["layers"]) not_resident += l["tier"] != "resident" || l["site"] == "host";
    EXPECT_GT(not_resident, 0) << s.dump();
    EXPECT_LE(s["streamed_bytes"].get<uint64_t>(), j["model"]["weight_bytes"].get<uint64_t>());
    // The lower bound uses the scheduler's moving-average link and disk
    // rates, so a pass that ran faster than that average can score above 1;
    // on a loaded 2-core machine up to 1.5 was seen. Only sanity here: the
    // efficiency figures are benchmarks' business (bench/RESULTS.md).
    const double eff = s["overlap_efficiency"];
    EXPECT_GT(eff, 0);
    EXPECT_LE(eff, kMaxEfficiency);
    const double ratio = s["ratio_to_best"];
    if (med == best) EXPECT_DOUBLE_EQ(ratio, 1.0);
    else EXPECT_GE(ratio, 1.0);
    EXPECT_EQ(s["passes"].size(), 3u);
  }
  EXPECT_EQ(j["reference"], "planned");
  EXPECT_GT(j["lower_bound_ms"].get<double>(), 0);
  EXPECT_GT(j["predicted_ms"].get<double>(), 0);
  EXPECT_GT(j["overlap_efficiency"].get<double>(), 0);
  EXPECT_LE(j["overlap_efficiency"].get<double>(), kMaxEfficiency);

  const auto t = nlohmann::json::parse(slurp(trace_path));
  ASSERT_TRUE(t["traceEvents"].is_array());
  std::set<int> pids;
  size_t complete = 0;
  for (const auto& e : t["traceEvents"]) {
    for (const char* k : {"ph", "ts", "pid", "tid", "name"}) ASSERT_TRUE(e.contains(k)) << e.dump();
    if (e["ph"] == "X") {
      ASSERT_TRUE(e.contains("dur")) << e.dump();
      ASSERT_TRUE(e["dur"].is_number());
      EXPECT_GE(e["dur"].get<double>(), 0);
      pids.insert(e["pid"].get<int>());
      ++complete;
    }
  }
  EXPECT_GE(complete, 3u * 3u * 8u);  // 3 strategies x 3 passes x 8 computes, at least
  EXPECT_EQ(pids.size(), 3u);

  const std::string html = slurp(report_path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase)));
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  for (const char* s : {"serial", "overlap", "planned"}) {
    const std::string tag = std::string("<svg class=\"timeline\" data-strategy=\"") + s + "\"";
    const size_t at = html.find(tag);
    ASSERT_NE(at, std::string::npos) << s;
    const size_t end = html.find("</svg>", at);
    const std::string svg = html.substr(at, end - at);
    EXPECT_NE(svg.find("class=\"ev compute\""), std::string::npos) << s;
    // Streamed from the file, or read by the host site (planned's choice).
    const bool from_file = svg.find("<rect class=\"ev disk\"") != std::string::npos;
    EXPECT_TRUE(from_file || (std::string(s) == "planned" && svg.find("class=\"ev host") != std::string::npos)) << s;
  }
  EXPECT_NE(html.find("class=\"layer-bars\""), std::string::npos);
  EXPECT_NE(html.find("skipped"), std::string::npos);  // resident
}

TEST_F(BenchCli, DecodeWritesJsonTraceAndReport) {
  // vram: below the model; ram 0: streamed layers come from the file (buffered:
  // page-cache reads keep the disk term of the bound from dominating a tiny model).
  const uint64_t bytes = std::filesystem::file_size(model_);
  const std::string a = dir_->file("d.json"), t = dir_->file("d.trace.json"), h = dir_->file("d.html");
  CliResult b = run_cli("bench " + model_ + " --backend host --vram " + std::to_string(bytes * 4 / 5) +
                        " --ram 0 --io buffered --ctx 64 --mode decode --batch 2 --passes 3 --warmup 1 --json " + a + " --trace " + t +
                        " --report " + h);
  ASSERT_EQ(b.exit_code, 0) << b.out;
  EXPECT_NE(b.out.find("planned"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("interleaved"), std::string::npos) << b.out;
  check_bench_outputs(a, t, h, "decode", 2);
}

// Hybrid execution (issue 16): `host` and `planned --host-factor` print each
// plan's sites and the measured per-block costs that explain them; the JSON
// has a site per layer.
TEST_F(BenchCli, HostStrategyPrintsSitesAndCosts) {
  const uint64_t bytes = std::filesystem::file_size(model_);
  const std::string a = dir_->file("h.json");
  CliResult b = run_cli("bench " + model_ + " --backend host --vram " + std::to_string(bytes * 4 / 5) +
                        " --ram 64MiB --ctx 64 --mode decode --strategies host,planned --host-factor 1 --passes 2 "
                        "--warmup 1 --json " + a);
  ASSERT_EQ(b.exit_code, 0) << b.out;
  EXPECT_NE(b.out.find("plan host:"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("on the host site"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("sites "), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("costs (class 0"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("host compute"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("no split gain"), std::string::npos) << b.out;  // the host backend's halves share cores
  std::ifstream in(a);
  const auto j = nlohmann::json::parse(in);
  int host_layers = 0;
  for (const auto& s : j["strategies"])
    if (s["name"] == "host")
      for (const auto& l : s["layers"]) host_layers += l["site"] == "host";
  EXPECT_GT(host_layers, 0);
}

TEST_F(BenchCli, PrefillWritesJsonTraceAndReport) {
  const uint64_t bytes = std::filesystem::file_size(model_);
  const std::string a = dir_->file("p.json"), t = dir_->file("p.trace.json"), h = dir_->file("p.html");
  CliResult b = run_cli("bench " + model_ + " --backend host --vram " + std::to_string(bytes * 4 / 5) +
                        " --ram 0 --io buffered --mode prefill --prompt-len 8 --passes 3 --warmup 1 --blocks --json " + a +
                        " --trace " + t + " --report " + h);
  ASSERT_EQ(b.exit_code, 0) << b.out;
  EXPECT_NE(b.out.find("blocks"), std::string::npos) << b.out;
  check_bench_outputs(a, t, h, "prefill", 8);
}

TEST_F(BenchCli, BadInputFailsCleanly) {
  CliResult m = run_cli("bench " + dir_->file("missing.gguf") + " --backend host");
  EXPECT_EQ(m.exit_code, 1) << m.out;
  EXPECT_NE(m.out.find("missing.gguf"), std::string::npos) << m.out;
  CliResult mode = run_cli("bench " + model_ + " --backend host --mode sideways");
  EXPECT_EQ(mode.exit_code, 2) << mode.out;
  CliResult box = run_cli("bench " + model_ + " --backend host --box " + model_);
  EXPECT_EQ(box.exit_code, 1) << box.out;
  EXPECT_NE(box.out.find("box file"), std::string::npos) << box.out;
  CliResult small = run_cli("bench " + model_ + " --backend host --vram 4KiB --strategies serial");
  EXPECT_EQ(small.exit_code, 1) << small.out;
  EXPECT_NE(small.out.find("budget"), std::string::npos) << small.out;
}

// The uvm strategy (weights in CUDA managed memory) needs the cuda backend:
// beside a strategy that runs it is listed as skipped with that reason (text
// and JSON); alone, bench fails with the reason and a non-zero exit.
TEST_F(BenchCli, UvmIsSkippedWithAReasonOnTheHostBackend) {
  const std::string j = dir_->file("uvm.json");
  CliResult both = run_cli("bench " + model_ + " --backend host --vram 16MiB --strategies serial,uvm --passes 1 --warmup 0 --json " + j);
  ASSERT_EQ(both.exit_code, 0) << both.out;
  EXPECT_NE(both.out.find("uvm       skipped: uvm needs the cuda backend"), std::string::npos) << both.out;
  const auto r = nlohmann::json::parse(slurp(j));
  ASSERT_EQ(r["strategies"].size(), 2u);
  EXPECT_EQ(r["strategies"][0]["name"], "serial");
  EXPECT_FALSE(r["strategies"][0]["skipped"].get<bool>());
  EXPECT_EQ(r["strategies"][1]["name"], "uvm");
  EXPECT_TRUE(r["strategies"][1]["skipped"].get<bool>());
  // "this run uses the host backend", or "built without CUDA" in a build without it.
  EXPECT_NE(r["strategies"][1]["skip_reason"].get<std::string>().find("needs the cuda backend"), std::string::npos);

  CliResult alone = run_cli("bench " + model_ + " --backend host --strategies uvm --passes 1 --warmup 0");
  EXPECT_EQ(alone.exit_code, 1) << alone.out;
  EXPECT_NE(alone.out.find("every strategy was skipped (uvm: uvm needs the cuda backend"), std::string::npos)
      << alone.out;
  CliResult junk = run_cli("bench " + model_ + " --backend host --strategies uvmm");
  EXPECT_EQ(junk.exit_code, 2) << junk.out;
  EXPECT_NE(junk.out.find("unknown strategy 'uvmm'"), std::string::npos) << junk.out;
}

}  // namespace
}  // namespace layerstream

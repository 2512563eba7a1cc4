// ls_bench without a model: statistics, the session's schedules with fake
// runners (call order, skips, blocks), finalize()'s figures, and the JSON,
// Chrome trace and HTML outputs' structure.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "runtime/bench/bench_result.h"
#include "runtime/planning/box_probe.h"
#include "runtime/bench/report_html.h"
#include "runtime/bench/session.h"
#include "runtime/planning/stats.h"
#include "runtime/bench/trace_export.h"
#include "tests/common/testing.h"

namespace ls = layerstream;
namespace lb = layerstream::bench;
namespace lp = layerstream::planning;
namespace sc = layerstream::sched;

namespace {

TEST(BenchStats, SummarizeMatchesSortedSample) {
  std::mt19937_64 rng(ls::testing::fresh_seed());
  for (int n = 1; n <= 9; ++n) {
    std::vector<double> v(n);
    for (double& x : v) x = std::uniform_real_distribution<double>(0.1, 100)(rng);
    lp::MinMedMax s = lp::summarize(v);
    std::sort(v.begin(), v.end());
    EXPECT_EQ(s.min, v.front());
    EXPECT_EQ(s.max, v.back());
    EXPECT_DOUBLE_EQ(s.median, n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
  }
  lp::MinMedMax e = lp::summarize({});
  EXPECT_EQ(e.min, 0);
  EXPECT_EQ(e.max, 0);
}

// A fake runner: pass times drawn around `base_s`, logs its calls.
class FakeRunner : public lb::BenchRunner {
 public:
  FakeRunner(std::string name, double base_s, std::vector<std::string>* log, uint64_t seed)
      : name_(std::move(name)), base_(base_s), log_(log), rng_(seed) {}
  ls::Result<lb::PassOutput> run_pass() override {
    log_->push_back(name_);
    lb::PassOutput o;
    const double t = base_ * std::uniform_real_distribution<double>(1.0, 1.2)(rng_);
    o.summary.pass = pass_;
    o.summary.measured_s = t;
    o.summary.sum_compute_s = 0.6 * base_;
    o.summary.lower_bound_s = 0.8 * base_;
    o.summary.predicted_s = base_;
    o.summary.streamed_bytes = 3 << 20;
    o.summary.stall_s = {0.01 * t, 0.02 * t, 0};
    double at = 1000.0 * pass_;  // executor time base: not zero
    for (int l = 0; l < 3; ++l) {
      o.events.push_back({sc::TraceKind::kCopy, l, 0, pass_, at, at + 100, 1 << 20});
      o.events.push_back({sc::TraceKind::kCompute, l, 0, pass_, at + 100, at + 300, 0});
      at += 300;
    }
    ++pass_;
    return o;
  }
  std::string plan_description() const override { return name_ + " plan"; }
  std::vector<lb::LayerDesc> layers() const override {
    return {{"embedding", 1 << 20, sc::Tier::kRam}, {"blk.0", 1 << 20, sc::Tier::kDisk}, {"head", 1 << 20, sc::Tier::kResident}};
  }
  double link_gbps() const override { return 2.5; }
  double disk_gbps() const override { return 1.5; }

 private:
  std::string name_;
  double base_;
  std::vector<std::string>* log_;
  std::mt19937_64 rng_;
  uint64_t pass_ = 0;
};

struct Fixture {
  std::vector<std::string> log;
  int created = 0;
  std::vector<lb::StrategySpec> specs(std::vector<std::pair<std::string, double>> s, uint64_t seed) {
    std::vector<lb::StrategySpec> out;
    for (auto& [name, base] : s) {
      lb::StrategySpec sp;
      sp.name = name;
      sp.footprint_bytes = 100;
      sp.create = [this, name = name, base = base, seed]() -> ls::Result<std::unique_ptr<lb::BenchRunner>> {
        ++created;
        return std::unique_ptr<lb::BenchRunner>(new FakeRunner(name, base, &log, seed + created));
      };
      out.push_back(std::move(sp));
    }
    return out;
  }
};

TEST(BenchSession, InterleavesRoundRobinWithRotation) {
  Fixture f;
  auto specs = f.specs({{"serial", 0.3}, {"overlap", 0.2}, {"planned", 0.1}}, ls::testing::fresh_seed());
  lb::SessionOptions o;
  o.warmup = 1;
  o.passes = 4;
  o.memory_available = 1000;
  LS_ASSERT_OK_AND_ASSIGN(lb::SessionOutput out, lb::run_session(specs, o));
  EXPECT_EQ(out.schedule, "interleaved");
  EXPECT_EQ(f.created, 3);
  // 1 warm-up round, then 4 rounds of (settle + measured) per strategy.
  ASSERT_EQ(f.log.size(), 3u + 4u * 3u * 2u);
  std::vector<std::string> rounds[5];
  rounds[0].assign(f.log.begin(), f.log.begin() + 3);
  for (int round = 0; round < 4; ++round) {
    for (int k = 0; k < 3; ++k) {
      const size_t at = 3 + round * 6 + k * 2;
      EXPECT_EQ(f.log[at], f.log[at + 1]);  // settle pass, then the measured pass of the same runner
      rounds[round + 1].push_back(f.log[at]);
    }
  }
  // Every round runs each strategy once; consecutive rounds start with a different one.
  for (int round = 0; round < 5; ++round) {
    std::vector<std::string> r = rounds[round];
    if (round > 1) EXPECT_NE(r[0], rounds[round - 1][0]);
    std::sort(r.begin(), r.end());
    EXPECT_EQ(r, (std::vector<std::string>{"overlap", "planned", "serial"}));
  }
  ASSERT_EQ(out.strategies.size(), 3u);
  for (const auto& s : out.strategies) {
    EXPECT_EQ(s.passes.size(), 4u) << s.name;
    EXPECT_EQ(s.plan, s.name + " plan");
    ASSERT_EQ(s.layers.size(), 3u);
    EXPECT_EQ(s.layers[1].tier, "disk");
    EXPECT_NEAR(s.layers[1].compute_s, 200e-6, 1e-9);
    EXPECT_NEAR(s.layers[1].transfer_s, 100e-6, 1e-9);
    // Timeline starts at 0 (relative to the pass).
    ASSERT_FALSE(s.timeline.empty());
    EXPECT_EQ(s.timeline.front().start_us, 0);
  }
  EXPECT_DOUBLE_EQ(out.link_gbps, 2.5);
}

TEST(BenchSession, FallsBackToBlocksWhenRunnersDoNotFitTogether) {
  Fixture f;
  auto specs = f.specs({{"serial", 0.3}, {"planned", 0.1}}, ls::testing::fresh_seed());
  lb::SessionOptions o;
  o.warmup = 1;
  o.passes = 5;
  o.memory_available = 150;  // one runner (100) at a time
  LS_ASSERT_OK_AND_ASSIGN(lb::SessionOutput out, lb::run_session(specs, o));
  EXPECT_EQ(out.schedule, "blocks");
  EXPECT_NE(out.schedule_reason.find("available"), std::string::npos) << out.schedule_reason;
  EXPECT_EQ(f.created, 4);  // 2 rounds x 2 strategies
  // Blocks alternate: round 0 runs serial then planned, round 1 planned then serial.
  ASSERT_EQ(f.log.size(), 2u * (3 + 1) + 2u * (2 + 1));
  EXPECT_EQ(f.log.front(), "serial");
  EXPECT_EQ(f.log[4], "planned");
  EXPECT_EQ(f.log[8], "planned");
  EXPECT_EQ(f.log.back(), "serial");
  for (const auto& s : out.strategies) EXPECT_EQ(s.passes.size(), 5u);
}

TEST(BenchSession, SkipsListedAndOutOfBudgetStrategies) {
  Fixture f;
  auto specs = f.specs({{"serial", 0.3}, {"planned", 0.1}}, ls::testing::fresh_seed());
  lb::StrategySpec listed;
  listed.name = "resident";
  listed.skip_reason = "does not fit";
  specs.insert(specs.begin(), listed);
  lb::StrategySpec oob;
  oob.name = "overlap";
  oob.skip_if_out_of_budget = true;
  oob.create = []() -> ls::Result<std::unique_ptr<lb::BenchRunner>> {
    return ls::Status::OutOfBudget("needs 12 B, 10 B available");
  };
  specs.push_back(oob);
  lb::SessionOptions o;
  o.passes = 2;
  LS_ASSERT_OK_AND_ASSIGN(lb::SessionOutput out, lb::run_session(specs, o));
  ASSERT_EQ(out.strategies.size(), 4u);
  EXPECT_TRUE(out.strategies[0].skipped);
  EXPECT_EQ(out.strategies[0].skip_reason, "does not fit");
  EXPECT_TRUE(out.strategies[3].skipped);
  EXPECT_NE(out.strategies[3].skip_reason.find("12 B"), std::string::npos);
  EXPECT_EQ(std::count(f.log.begin(), f.log.end(), "serial"), 5);  // 1 warm-up + 2 x (settle + measured)

  // An error that is not OutOfBudget fails the session, naming the strategy.
  specs.back().create = []() -> ls::Result<std::unique_ptr<lb::BenchRunner>> {
    return ls::Status::IOError("disk gone");
  };
  auto bad = lb::run_session(specs, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("overlap"), std::string::npos) << bad.status().message();
  o.passes = 0;
  EXPECT_FALSE(lb::run_session(specs, o).ok());
}

lb::BenchResult run_fake_bench(uint64_t seed) {
  Fixture f;
  auto specs = f.specs({{"serial", 0.3}, {"overlap", 0.15}, {"planned", 0.1}}, seed);
  lb::StrategySpec listed;
  listed.name = "resident";
  listed.skip_reason = "model <needs> more";
  specs.insert(specs.begin(), listed);
  lb::SessionOptions o;
  o.passes = 5;
  auto out = lb::run_session(specs, o);
  EXPECT_TRUE(out.ok());
  lb::BenchResult r;
  r.box.backend = "host";
  r.box.device = "host (2 threads)";
  r.model.file = "m.gguf";
  r.model.layers = 3;
  r.workload.mode = "decode";
  r.workload.tokens_per_pass = 1;
  r.workload.passes = 5;
  r.strategies = out->strategies;
  r.schedule = out->schedule;
  lb::finalize(r);
  return r;
}

TEST(BenchResult, FinalizeComputesRatiosAndReference) {
  lb::BenchResult r = run_fake_bench(ls::testing::fresh_seed());
  EXPECT_EQ(r.best, "planned");
  EXPECT_EQ(r.reference, "planned");
  for (const auto& s : r.strategies) {
    if (s.skipped) continue;
    EXPECT_LE(s.pass_ms.min, s.pass_ms.median);
    EXPECT_LE(s.pass_ms.median, s.pass_ms.max);
    EXPECT_NEAR(s.tokens_per_s, 1.0 / (s.pass_ms.median * 1e-3), 1e-6 * s.tokens_per_s);
    EXPECT_NEAR(s.overlap_efficiency, s.lower_bound_ms / s.pass_ms.median, 1e-12);
    EXPECT_GT(s.overlap_efficiency, 0);
    EXPECT_LE(s.overlap_efficiency, 1.0);
    if (s.name == r.best) EXPECT_DOUBLE_EQ(s.ratio_to_best, 1.0);
    else EXPECT_GT(s.ratio_to_best, 1.0);
    EXPECT_EQ(s.streamed_bytes, 3u << 20);
  }
  EXPECT_GT(r.lower_bound_ms, 0);
  std::string table = lb::format_table(r);
  EXPECT_NE(table.find("skipped: model <needs> more"), std::string::npos);
  EXPECT_NE(table.find("overlap efficiency"), std::string::npos);
}

TEST(BenchResult, JsonHasEveryRequiredField) {
  lb::BenchResult r = run_fake_bench(ls::testing::fresh_seed());
  nlohmann::json j = nlohmann::json::parse(lb::to_json(r).dump());
  for (const char* k : {"box", "model", "budget", "strategies", "lower_bound_ms", "predicted_ms", "overlap_efficiency"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"backend", "device", "link_gbps", "disk_gbps"}) EXPECT_TRUE(j["box"].contains(k)) << k;
  for (const char* k : {"file", "bytes", "layers"}) EXPECT_TRUE(j["model"].contains(k)) << k;
  ASSERT_EQ(j["strategies"].size(), 4u);
  EXPECT_TRUE(j["strategies"][0]["skipped"].get<bool>());
  for (size_t i = 1; i < 4; ++i) {
    const auto& s = j["strategies"][i];
    for (const char* k : {"name", "pass_ms", "tokens_per_s", "stall_ms", "streamed_bytes"})
      EXPECT_TRUE(s.contains(k)) << k;
    EXPECT_LE(s["pass_ms"]["min"].get<double>(), s["pass_ms"]["median"].get<double>());
    EXPECT_LE(s["pass_ms"]["median"].get<double>(), s["pass_ms"]["max"].get<double>());
  }
}

TEST(BenchResult, ChromeTraceHasRequiredFieldsPerEvent) {
  std::vector<std::string> log;
  lb::BenchResult r = run_fake_bench(ls::testing::fresh_seed());
  std::vector<std::vector<sc::TraceEvent>> ev(r.strategies.size());
  for (size_t i = 0; i < r.strategies.size(); ++i) ev[i] = r.strategies[i].timeline;
  nlohmann::json j = nlohmann::json::parse(lb::bench_chrome_json(r, ev));
  ASSERT_TRUE(j["traceEvents"].is_array());
  size_t complete = 0;
  std::set<int> pids;
  for (const auto& e : j["traceEvents"]) {
    for (const char* k : {"ph", "ts", "pid", "tid", "name"}) ASSERT_TRUE(e.contains(k)) << e.dump();
    if (e["ph"] == "X") {
      ASSERT_TRUE(e.contains("dur")) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0);
      ++complete;
      pids.insert(e["pid"].get<int>());
    }
  }
  EXPECT_EQ(complete, 3u * 6u);  // 3 strategies x (3 copies + 3 computes)
  EXPECT_EQ(pids.size(), 3u);
}

TEST(BenchReport, HtmlIsSelfContainedWithATimelinePerStrategy) {
  lb::BenchResult r = run_fake_bench(ls::testing::fresh_seed());
  const std::string html = lb::render_html_report(r);
  EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase)));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  for (const char* s : {"serial", "overlap", "planned"}) {
    EXPECT_NE(html.find(std::string("<svg class=\"timeline\" data-strategy=\"") + s + "\""), std::string::npos) << s;
    EXPECT_NE(html.find(std::string("<g class=\"events\" data-strategy=\"") + s + "\""), std::string::npos) << s;
  }
  EXPECT_NE(html.find("class=\"layer-bars\""), std::string::npos);
  EXPECT_NE(html.find("model &lt;needs&gt; more"), std::string::npos);  // escaped
  EXPECT_EQ(html.find("<needs>"), std::string::npos);
}

TEST(BoxPrior, ReadsRatesAndRejectsJunk) {
  std::mt19937_64 rng(ls::testing::fresh_seed());
  const double link = std::uniform_real_distribution<double>(1, 50)(rng);
  const double disk = std::uniform_real_distribution<double>(0.5, 7)(rng);
  const double buffered = disk * 3;
  nlohmann::json doc = {{"probe_version", 1}, {"link_gbps", link}, {"disk_gbps", disk},
                        {"disk_gbps_by_path", {{"uring", disk}, {"buffered", buffered}}}};
  LS_ASSERT_OK_AND_ASSIGN(lp::BoxPrior p, lp::box_prior_from_json(doc, "box file x", ls::io::IoPath::kAuto));
  EXPECT_DOUBLE_EQ(p.link_gbps, link);
  EXPECT_DOUBLE_EQ(p.disk_gbps, disk);
  LS_ASSERT_OK_AND_ASSIGN(lp::BoxPrior b, lp::box_prior_from_json(doc, "box file x", ls::io::IoPath::kBuffered));
  EXPECT_DOUBLE_EQ(b.disk_gbps, buffered);

  ls::testing::TempDir dir;
  const std::string path = dir.file("box.json");
  std::string text = lp::to_json(lp::BoxProfile{}).dump();
  ls::testing::write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
  auto zero = lp::load_box_prior(path);  // an empty profile: link 0
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("link_gbps"), std::string::npos);

  nlohmann::json bad = doc;
  bad["link_gbps"] = "fast";
  EXPECT_TRUE(lp::box_prior_from_json(bad, "b", ls::io::IoPath::kAuto).status().IsCorruption());
  bad = doc;
  bad.erase("probe_version");
  EXPECT_TRUE(lp::box_prior_from_json(bad, "b", ls::io::IoPath::kAuto).status().IsCorruption());
  ls::testing::write_file(path, {'{', 'x'});
  EXPECT_TRUE(lp::load_box_prior(path).status().IsCorruption());
  EXPECT_FALSE(lp::load_box_prior(dir.file("missing.json")).ok());
}

}  // namespace

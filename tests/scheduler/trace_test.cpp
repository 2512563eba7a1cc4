// Trace: Chrome trace-event JSON is valid and complete.
#include "runtime/scheduler/trace.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "tests/common/testing.h"

namespace layerstream::sched {
namespace {

TEST(Trace, ChromeJsonHasEveryFieldPerEvent) {
  std::mt19937_64 rng(testing::fresh_seed());
  std::uniform_real_distribution<double> us(0, 1e5);
  TraceRecorder rec;
  rec.set_layer_names({"embed", "", "blk.2"});
  std::vector<TraceEvent> added;
  for (int i = 0; i < 50; ++i) {
    double a = us(rng), b = us(rng);
    TraceEvent e{static_cast<TraceKind>(i % 5), i % 3, i % 2 - 1, uint64_t(i / 7), std::min(a, b), std::max(a, b),
                 uint64_t(i) * 4096};
    rec.add(e);
    added.push_back(e);
  }
  testing::TempDir dir;
  LS_ASSERT_OK(rec.write_chrome_json(dir.file("t.json")));
  auto bytes = testing::read_file(dir.file("t.json"));
  nlohmann::json doc = nlohmann::json::parse(bytes.begin(), bytes.end());
  ASSERT_TRUE(doc["traceEvents"].is_array());
  size_t x = 0;
  for (const auto& e : doc["traceEvents"]) {
    for (const char* k : {"ph", "ts", "pid", "tid", "name"}) ASSERT_TRUE(e.contains(k)) << e.dump();
    if (e["ph"] == "X") {
      ASSERT_TRUE(e.contains("dur"));
      const TraceEvent& src = added[x++];
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), src.start_us);
      EXPECT_NEAR(e["dur"].get<double>(), src.end_us - src.start_us, 1e-9);
      EXPECT_EQ(e["args"]["layer"], src.layer);
      EXPECT_EQ(e["args"]["pass"], src.pass);
    }
  }
  EXPECT_EQ(x, added.size());
  EXPECT_NE(rec.chrome_json().find("compute embed"), std::string::npos);
  EXPECT_NE(rec.chrome_json().find("layer1"), std::string::npos);
}

TEST(Trace, WriteToBadPathIsIOError) {
  TraceRecorder rec;
  Status s = rec.write_chrome_json("/nonexistent-dir/x/trace.json");
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("/nonexistent-dir/x/trace.json"), std::string::npos);
}

}  // namespace
}  // namespace layerstream::sched

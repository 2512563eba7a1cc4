// The app's log sink: lines at or above the level reach it with their level
// and text, none reach stderr meanwhile, and an empty sink restores stderr.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "layerstream/log.h"
#include "runtime/core/log.h"

namespace layerstream {
namespace {

TEST(LogSink, RoutesLinesAtTheLevelAndRestoresStderr) {
  std::vector<std::pair<LogLevel, std::string>> lines;
  set_log_sink([&](LogLevel l, std::string_view m) { lines.emplace_back(l, std::string(m)); });
  ASSERT_TRUE(set_log_level("info").ok());
  ::testing::internal::CaptureStderr();
  LS_LOG_INFO("loaded {} layers", 12);
  LS_LOG_DEBUG("not shown at info");
  LS_LOG_WARN("budget {} below {}", "1MiB", "2MiB");
  LS_LOG_ERROR("read failed");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], std::make_pair(LogLevel::kInfo, std::string("loaded 12 layers")));
  EXPECT_EQ(lines[1], std::make_pair(LogLevel::kWarn, std::string("budget 1MiB below 2MiB")));
  EXPECT_EQ(lines[2].first, LogLevel::kError);

  // Lines from several threads arrive whole, one call at a time.
  lines.clear();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) LS_LOG_INFO("thread {} line {}", t, i);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(lines.size(), 200u);
  for (const auto& [level, text] : lines) EXPECT_EQ(text.rfind("thread ", 0), 0u) << text;

  set_log_sink({});
  ::testing::internal::CaptureStderr();
  LS_LOG_WARN("back on stderr");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("back on stderr"), std::string::npos) << err;
  EXPECT_NE(err.find("warn"), std::string::npos) << err;
  EXPECT_EQ(lines.size(), 200u);
}

}  // namespace
}  // namespace layerstream

#include "layerstream/units.h"

#include "tests/common/testing.h"

namespace layerstream {
namespace {

TEST(ParseSize, AcceptsSuffixes) {
  struct Case { const char* text; uint64_t bytes; };
  const Case cases[] = {
      {"0", 0}, {"4096", 4096}, {"12B", 12}, {"1K", 1024}, {"1KiB", 1024}, {"2kb", 2000},
      {"512MiB", 512ull << 20}, {"512m", 512ull << 20}, {"6GiB", 6ull << 30}, {"1.5G", 3ull << 29},
      {"3GB", 3000000000ull}, {"1TiB", 1ull << 40}, {"2 MiB", 2ull << 20},
  };
  for (const auto& c : cases) {
    Result<uint64_t> r = parse_size(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.bytes) << c.text;
  }
}

TEST(ParseSize, RejectsJunkWithTheText) {
  for (const char* text : {"", "GiB", "-1G", "12XB", "1.2.3M", "1e30", "99999999999TiB"}) {
    Result<uint64_t> r = parse_size(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_TRUE(r.status().IsInvalidArgument());
    EXPECT_NE(r.status().message().find(std::string("'") + text + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(FormatBytes, PicksAUnit) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(3ull << 29), "1.50 GiB");
  EXPECT_EQ(format_bytes(512ull << 20), "512.00 MiB");
}

}  // namespace
}  // namespace layerstream

#include "layerstream/status.h"

#include <cerrno>

#include "runtime/core/status_macros.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

Result<int> half_of(int x) {
  if (x % 2) return Status::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status quarter(int x, int* out) {
  LS_ASSIGN_OR_RETURN(int h, half_of(x));
  LS_ASSIGN_OR_RETURN(int q, half_of(h));
  *out = q;
  return Status::OK();
}

TEST(Status, OkIsDefaultAndCheap) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.message(), "");
}

TEST(Status, CarriesCodeMessageAndContext) {
  Status s = Status::Corruption("bad magic 0x12345678 at offset 0");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_FALSE(s.IsIOError());
  EXPECT_EQ(s.ToString(), "Corruption: bad magic 0x12345678 at offset 0");
  Status c = s.WithContext("model.gguf");
  EXPECT_EQ(c.code(), StatusCode::kCorruption);
  EXPECT_EQ(c.message(), "model.gguf: bad magic 0x12345678 at offset 0");
  EXPECT_EQ(s.message(), "bad magic 0x12345678 at offset 0");  // original unchanged
}

TEST(Status, FromErrnoNamesTheError) {
  Status s = Status::FromErrno("read /x at offset 4096", EIO);
  EXPECT_TRUE(s.IsIOError());
  EXPECT_NE(s.message().find("read /x at offset 4096"), std::string::npos);
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos);
  EXPECT_NE(s.message().find("errno 5"), std::string::npos);
}

TEST(Result, PropagatesValuesAndErrors) {
  int out = 0;
  LS_EXPECT_OK(quarter(12, &out));
  EXPECT_EQ(out, 3);
  Status s = quarter(6, &out);  // 6 -> 3 -> odd
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_EQ(s.message(), "odd: 3");
  Result<int> r = half_of(7);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 7");
}

TEST(Result, OkStatusIsNotAValue) {
  Result<int> r{Status::OK()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> r = half_of(1);
  EXPECT_DEATH((void)r.value(), "odd: 1");
}

}  // namespace
}  // namespace layerstream

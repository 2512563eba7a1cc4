// Shared test helpers: temporary directories, random data, Status matchers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "layerstream/status.h"
#include "runtime/core/status_macros.h"

namespace layerstream::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A seed that differs between runs (printed by the test so a failure can be
// replayed with LAYERSTREAM_TEST_SEED=<seed>).
uint64_t fresh_seed();

std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64& rng);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> read_file(const std::string& path);

// Every one of `parts` occurs in `text` (an error message, a log, a
// command's output); a failure names the missing parts and shows the text.
::testing::AssertionResult contains_all(std::string_view text, std::initializer_list<std::string_view> parts);

// log-softmax of `row` at `id`, in double: the reference for logprobs.
double log_softmax_at(std::span<const float> row, int32_t id);

// 64-bit FNV-1a of n bytes: the checksum the streaming suites compare a
// compute call's data with its layer's content by.
uint64_t fnv1a(const void* data, size_t n);

}  // namespace layerstream::testing

#define LS_ASSERT_OK(expr)                                          \
  do {                                                              \
    ::layerstream::Status _s = (expr);                              \
    ASSERT_TRUE(_s.ok()) << #expr << " -> " << _s.ToString();       \
  } while (0)
#define LS_EXPECT_OK(expr)                                          \
  do {                                                              \
    ::layerstream::Status _s = (expr);                              \
    EXPECT_TRUE(_s.ok()) << #expr << " -> " << _s.ToString();       \
  } while (0)
// Asserts a Result is ok and moves its value into lhs.
#define LS_ASSERT_OK_AND_ASSIGN(lhs, expr)                                         \
  auto LS_CONCAT(_ls_r_, __LINE__) = (expr);                                       \
  ASSERT_TRUE(LS_CONCAT(_ls_r_, __LINE__).ok()) << #expr << " -> "                 \
                                                 << LS_CONCAT(_ls_r_, __LINE__).status().ToString(); \
  lhs = std::move(LS_CONCAT(_ls_r_, __LINE__)).value()

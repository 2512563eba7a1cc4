// Helpers shared by the io tests: a random file on disk and path names.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "io/reader.h"
#include "tests/common/testing.h"

namespace layerstream::io::testing {

// A random file of `bytes` bytes in `dir`; returns its contents.
inline std::vector<uint8_t> make_file(const std::string& path, size_t bytes, std::mt19937_64& rng) {
  auto data = layerstream::testing::random_bytes(bytes, rng);
  layerstream::testing::write_file(path, data);
  return data;
}

// `r` reads back the whole file, `data`, byte for byte.
inline void expect_reads_back(Reader& r, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(data.size());
  LS_ASSERT_OK(r.read_span(0, out.size(), out.data()));
  EXPECT_EQ(out, data);
}

inline std::string path_param_name(IoPath p) { return std::string(name_of(p)); }

// Page-aligned heap buffer.
struct AlignedBuf {
  explicit AlignedBuf(size_t n) : bytes(n), p(static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {}
  ~AlignedBuf() { std::free(p); }
  AlignedBuf(const AlignedBuf&) = delete;
  AlignedBuf& operator=(const AlignedBuf&) = delete;
  size_t bytes;
  uint8_t* p;
};

}  // namespace layerstream::io::testing

#include "tests/common/testing.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace layerstream::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/layerstream-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    return;
  }
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

uint64_t fresh_seed() {
  if (const char* s = std::getenv("LAYERSTREAM_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                  (static_cast<uint64_t>(getpid()) << 32);
  std::printf("[ seed     ] LAYERSTREAM_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

double log_softmax_at(std::span<const float> row, int32_t id) {
  double max = -INFINITY, sum = 0;
  for (float x : row) max = std::max(max, double(x));
  for (float x : row) sum += std::exp(double(x) - max);
  return double(row[id]) - max - std::log(sum);
}

std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

::testing::AssertionResult contains_all(std::string_view text, std::initializer_list<std::string_view> parts) {
  std::string missing;
  for (std::string_view part : parts)
    if (text.find(part) == std::string_view::npos) missing += (missing.empty() ? "'" : ", '") + std::string(part) + "'";
  if (missing.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "missing " << missing << " in: " << text;
}

uint64_t fnv1a(const void* data, size_t n) {
  const auto* b = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

}  // namespace layerstream::testing

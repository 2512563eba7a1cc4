// Quantised block layouts against a float64 decoder written from the GGUF
// spec, reading raw little-endian bytes (not the structs under test).
#include "kernels/math/quant_blocks.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/math/convert_row.h"
#include "tests/common/testing.h"

namespace layerstream::math {
namespace {

double half_at(const uint8_t* p) {
  const uint16_t h = static_cast<uint16_t>(p[0] | (p[1] << 8));
  const int e = (h >> 10) & 31, m = h & 1023;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h >> 15) ? -mag : mag;
}

// Spec decoders: element j of one block starting at p.
double ref_q8_0(const uint8_t* p, int j) { return half_at(p) * static_cast<int8_t>(p[2 + j]); }
double ref_q4_0(const uint8_t* p, int j) {
  const int q = j < 16 ? (p[2 + j] & 15) : (p[2 + j - 16] >> 4);
  return half_at(p) * (q - 8);
}
double ref_q4_1(const uint8_t* p, int j) {
  const int q = j < 16 ? (p[4 + j] & 15) : (p[4 + j - 16] >> 4);
  return half_at(p) * q + half_at(p + 2);
}

// Random bytes with a finite, moderate scale in the half fields.
std::vector<uint8_t> random_blocks(size_t blocks, size_t block_bytes, int half_fields, std::mt19937_64& rng) {
  std::vector<uint8_t> bytes = testing::random_bytes(blocks * block_bytes, rng);
  for (size_t b = 0; b < blocks; ++b) {
    for (int f = 0; f < half_fields; ++f) {
      const uint16_t h = f32_to_f16(std::ldexp(static_cast<float>(rng() % 2000) / 1000.0f - 1.0f, -4));
      std::memcpy(&bytes[b * block_bytes + 2 * f], &h, 2);
    }
  }
  return bytes;
}

struct Case {
  GgmlType type;
  size_t block_bytes;
  int half_fields;
  double (*ref)(const uint8_t*, int);
};

class QuantLayout : public ::testing::TestWithParam<Case> {};

TEST_P(QuantLayout, DecodeMatchesSpecExactly) {
  const Case c = GetParam();
  std::mt19937_64 rng(testing::fresh_seed());
  for (size_t blocks : {1u, 3u, 17u}) {
    auto bytes = random_blocks(blocks, c.block_bytes, c.half_fields, rng);
    std::vector<float> out(blocks * 32, NAN);
    LS_ASSERT_OK(decode_row(c.type, bytes.data(), out.size(), out.data()));
    for (size_t b = 0; b < blocks; ++b) {
      for (int j = 0; j < 32; ++j) {
        const double ref = c.ref(&bytes[b * c.block_bytes], j);
        ASSERT_EQ(static_cast<double>(out[b * 32 + j]), static_cast<double>(static_cast<float>(ref)))
            << "block " << b << " element " << j;
      }
    }
  }
}

TEST_P(QuantLayout, EncodeErrorWithinHalfAStep) {
  const Case c = GetParam();
  std::mt19937_64 rng(testing::fresh_seed());
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t n = 32 * 9;
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  std::vector<uint8_t> enc(n / 32 * c.block_bytes);
  LS_ASSERT_OK(encode_row(c.type, x.data(), n, enc.data()));
  for (size_t b = 0; b < n / 32; ++b) {
    const double d = std::fabs(half_at(&enc[b * c.block_bytes]));
    for (int j = 0; j < 32; ++j) {
      const double err = std::fabs(c.ref(&enc[b * c.block_bytes], j) - x[b * 32 + j]);
      // Rounding to the grid costs at most half a step, plus the f16 rounding of d and m.
      // Q4_0's grid is -8d..7d with -8d at the largest magnitude, so values of the
      // other sign beyond 7d clamp to 7d (error up to one step, as in ggml).
      double step_err = 0.5 * d;
      if (c.type == GgmlType::Q4_0) step_err = std::max(step_err, std::fabs(x[b * 32 + j]) - 7 * d);
      // The encoder picks q with the unrounded d (and m); decoding uses their f16
      // roundings (relative 2^-11), which moves a value by up to |q| * d * 2^-11 + |m| * 2^-11.
      const double m = c.type == GgmlType::Q4_1 ? std::fabs(half_at(&enc[b * c.block_bytes + 2])) : 0.0;
      const double f16_err = (16 * d + m) / 2048;
      ASSERT_LE(err, step_err + f16_err + 2e-3 * std::fabs(x[b * 32 + j]) + 1e-3) << "block " << b << " j " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantLayout,
                         ::testing::Values(Case{GgmlType::Q8_0, 34, 1, ref_q8_0},
                                           Case{GgmlType::Q4_0, 18, 1, ref_q4_0},
                                           Case{GgmlType::Q4_1, 20, 2, ref_q4_1}),
                         [](const auto& info) { return std::string(ggml_type_traits(info.param.type).name); });

TEST(ConvertRow, RejectsUnsupportedAndRaggedRows) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(1024);
  Status s = encode_row(GgmlType::IQ2_XXS, x.data(), 256, out.data());
  EXPECT_TRUE(s.IsUnsupported());
  EXPECT_EQ(s.message(), "unsupported tensor type IQ2_XXS (id 16)");
  s = encode_row(GgmlType::Q8_0, x.data(), 33, out.data());
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST(GgmlTypes, NamesAndRetiredIds) {
  EXPECT_EQ(ggml_type_name(8), "Q8_0");
  EXPECT_EQ(ggml_type_name(4), "retired type id 4");
  EXPECT_EQ(ggml_type_name(99), "unknown type id 99");
  EXPECT_FALSE(ggml_type_traits(32).has_value());
  EXPECT_EQ(parse_ggml_type("q4_1"), GgmlType::Q4_1);
  EXPECT_EQ(ggml_type_traits(GgmlType::Q6_K).block_bytes, 210u);
}

}  // namespace
}  // namespace layerstream::math

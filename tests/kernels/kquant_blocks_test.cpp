// The Q5, K-quant, IQ4 and MXFP4 types: decoding against the float64 decoders of
// kquant_spec.h (written from the format description) on random blocks with
// extreme scales, through decode_row and every ISA's row decoder and dot;
// and the encoders' error against the grid each format stores.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/math/convert_row.h"
#include "kernels/math/fp16.h"
#include "tests/common/testing.h"
#include "tests/kernels/kquant_spec.h"

namespace layerstream::kernels::testing {
namespace {

// f16 bit patterns for scale fields: zero, smallest subnormal, largest
// subnormal, smallest normal, one, largest finite, each with both signs.
constexpr uint16_t kExtremeHalves[] = {0x0000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF,
                                       0x8000, 0x8001, 0x83FF, 0x8400, 0xBC00, 0xFBFF};

uint16_t random_scale(std::mt19937_64& rng) {
  if (rng() % 2) return kExtremeHalves[rng() % std::size(kExtremeHalves)];
  // a random finite value (exponent field 0..30)
  return static_cast<uint16_t>(((rng() % 31) << 10) | (rng() & 0x83FF));
}

// Random blocks: every byte random, every f16 scale field finite (extreme or random).
std::vector<uint8_t> random_blocks(GgmlType t, size_t n_blocks, std::mt19937_64& rng) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  std::vector<uint8_t> bytes = layerstream::testing::random_bytes(n_blocks * tr.block_bytes, rng);
  for (size_t b = 0; b < n_blocks; ++b) {
    for (int off : kspec_half_fields(t)) {
      const uint16_t h = random_scale(rng);
      std::memcpy(&bytes[b * tr.block_bytes + off], &h, 2);
    }
    for (int off : kspec_e8m0_fields(t)) {  // extremes (subnormal scales, the largest finite) or random
      constexpr uint8_t kExtremes[] = {0, 1, 2, 127, kSpecMaxFiniteE8m0};
      bytes[b * tr.block_bytes + off] = rng() % 2 ? kExtremes[rng() % std::size(kExtremes)]
                                                  : static_cast<uint8_t>(rng() % (kSpecMaxFiniteE8m0 + 1));
    }
  }
  return bytes;
}

// The f32 decoding is the exact value rounded once (see kquant_blocks.h).
bool decoded_exactly(float got, double exact) {
  if (static_cast<double>(static_cast<float>(exact)) == exact) return static_cast<double>(got) == exact;
  return std::fabs(got - exact) <= std::ldexp(std::fabs(exact), -24);
}

class KQuant : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override { rng_.seed(layerstream::testing::fresh_seed()); }
  std::mt19937_64 rng_;
};

TEST_P(KQuant, DecodeMatchesSpecOnRandomBlocksWithExtremeScales) {
  const GgmlType t = GetParam();
  const GgmlTypeTraits tr = ggml_type_traits(t);
  ASSERT_TRUE(tr.supported);
  std::vector<cpu::RowKernels> isas = {cpu::generic::row_kernels(t)};
  if (cpu::avx2::supported()) isas.push_back(cpu::avx2::row_kernels(t));
  if (cpu::avx512::supported()) isas.push_back(cpu::avx512::row_kernels(t));
  for (int round = 0; round < 20; ++round) {
    const size_t n_blocks = 1 + rng_() % 8;
    const size_t n = n_blocks * tr.block_elems;
    const std::vector<uint8_t> bytes = random_blocks(t, n_blocks, rng_);
    std::vector<double> exact(n);
    for (size_t i = 0; i < n; ++i) {
      exact[i] = kspec_element(t, &bytes[(i / tr.block_elems) * tr.block_bytes], static_cast<int>(i % tr.block_elems));
      ASSERT_TRUE(std::isfinite(exact[i]));
    }
    std::vector<float> out(n, NAN);
    LS_ASSERT_OK(math::decode_row(t, bytes.data(), n, out.data()));
    for (size_t i = 0; i < n; ++i) ASSERT_TRUE(decoded_exactly(out[i], exact[i])) << tr.name << " i=" << i << " got " << out[i] << " exact " << exact[i];
    // Every ISA's row decoder, from a block offset, and its dot against the float64 product
    // (tolerance: f32 accumulation, 1e-5 of sum |w x|).
    std::vector<float> x(n);
    for (auto& v : x) v = static_cast<float>(static_cast<int64_t>(rng_() % 2001) - 1000) / 1000.0f;
    double ref = 0, abs_sum = 0;
    for (size_t i = 0; i < n; ++i) {
      ref += exact[i] * x[i];
      abs_sum += std::fabs(exact[i] * x[i]);
    }
    for (const cpu::RowKernels& k : isas) {
      std::vector<float> dec(n - tr.block_elems, NAN);
      k.decode(bytes.data(), tr.block_elems, static_cast<int64_t>(dec.size()), dec.data());
      for (size_t i = 0; i < dec.size(); ++i) ASSERT_TRUE(decoded_exactly(dec[i], exact[i + tr.block_elems])) << tr.name << " i=" << i;
      // (MXFP4's largest scales put products near f32's maximum: a sum beyond its range overflows in any f32 dot.)
      if (abs_sum < 1e37) {
        EXPECT_LE(std::fabs(k.dot(bytes.data(), x.data(), static_cast<int64_t>(n)) - ref), 1e-5 * abs_sum) << tr.name;
      }
    }
  }
}

// Largest error of a round trip, relative to the block's largest |x|, that
// each format's grid allows: half a step of the code grid, or a whole step
// for the symmetric types whose grid is one code shorter on the positive side
// (the value of largest magnitude takes the most negative code), with a
// margin for the quantised sub-scales.
double max_rel_error(GgmlType t) {
  switch (t) {
    case GgmlType::Q5_0: return 1.0 / 16 * 1.05;  // step max/16, codes -16..15
    case GgmlType::Q5_1: return 1.0 / 31 * 1.1;   // step range/31, range <= 2 max
    case GgmlType::Q6_K: return 1.0 / 32 * 1.3;   // codes -32..31, 8-bit sub-scales
    case GgmlType::Q5_K: return 1.0 / 31 * 1.6;
    case GgmlType::Q4_K: return 1.0 / 15 * 1.6;
    case GgmlType::Q3_K: return 1.0 / 4 * 1.3;   // codes -4..3
    case GgmlType::Q2_K: return 1.0 / 3 * 1.6;
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS: return 0.16;  // the scale search may clip the extreme by 15% (scale 0.85)
    // the largest |x| lands in [8, 16) steps of 2^(e-128), whose largest code is 12 (it clips up to
    // 25%); between codes 8 and 12 the grid steps by 2 (error 1 step <= 1/8 of the maximum)
    case GgmlType::MXFP4: return 0.25;
    default: return 0;
  }
}

TEST_P(KQuant, EncodeRoundTripStaysOnTheGrid) {
  const GgmlType t = GetParam();
  const GgmlTypeTraits tr = ggml_type_traits(t);
  for (double amp : {1e-3, 1.0, 300.0}) {
    std::normal_distribution<float> dist(0.0f, static_cast<float>(amp));
    const size_t n_blocks = 16, n = n_blocks * tr.block_elems;
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng_);
    // one all-zero block and one constant block
    std::fill(x.begin(), x.begin() + tr.block_elems, 0.0f);
    std::fill(x.begin() + tr.block_elems, x.begin() + 2 * tr.block_elems, static_cast<float>(amp));
    std::vector<uint8_t> enc(n_blocks * tr.block_bytes);
    LS_ASSERT_OK(math::encode_row(t, x.data(), n, enc.data()));
    double sq_err = 0, sq_amax = 0;
    for (size_t b = 0; b < n_blocks; ++b) {
      float amax = 0;
      for (size_t j = 0; j < tr.block_elems; ++j) amax = std::max(amax, std::fabs(x[b * tr.block_elems + j]));
      sq_amax += static_cast<double>(amax) * amax * tr.block_elems;
      for (size_t j = 0; j < tr.block_elems; ++j) {
        const size_t i = b * tr.block_elems + j;
        const double v = kspec_element(t, &enc[b * tr.block_bytes], static_cast<int>(j));
        ASSERT_TRUE(std::isfinite(v));
        // Twice the grid's bound: llama.cpp's least-squares scale search may
        // clip the extreme values of a group by up to a step to fit the rest better.
        ASSERT_LE(std::fabs(v - x[i]), 2 * max_rel_error(t) * amax + 1e-30)
            << tr.name << " amp " << amp << " block " << b << " j " << j;
        sq_err += (v - x[i]) * (v - x[i]);
      }
    }
    // On average well under the worst case: errors spread evenly up to the bound
    // would have an RMS of bound / sqrt(3).
    EXPECT_LT(std::sqrt(sq_err / sq_amax), max_rel_error(t) / std::sqrt(3.0)) << tr.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, KQuant, ::testing::ValuesIn(kquant_types()),
                         [](const auto& info) { return std::string(ggml_type_traits(info.param).name); });

}  // namespace
}  // namespace layerstream::kernels::testing

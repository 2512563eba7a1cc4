// Each CPU kernel against a float64 reference on fresh random inputs.
// Tolerances (|got - ref| <= bound):
//   matmul, every weight type: 1e-5 * sum_i |w_i x_i| against the exactly
//     decoded weights (f32 accumulation rounding only); Q4_1: 4e-5 * that
//     sum, since the kernel forms d*sum(q x) + m*sum(x) whose terms can cancel.
//   rmsnorm, silu_mul, gelu_mul: 1e-5 relative per element (gelu_mul: plus
//     1e-6 * |up| absolute, where gelu(g) ~ 0 cancels); add, scale: 1e-6 relative.
//   rope: |pair| * (1e-6 + 4e-7 * pos * freq_scale): the angle is formed in f32.
//   attention: 1e-5 * max|v| (output is a convex combination of v rows).
//   embedding: exact.
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/attention_split.h"
#include "kernels/cpu/dot.h"
#include "kernels/math/activation.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/kernel_test_util.h"

namespace layerstream::kernels {
namespace {

using namespace testing;  // NOLINT: test file

class CpuKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const uint64_t seed = layerstream::testing::fresh_seed();
    rng_.seed(seed);
  }
  // gate in [-8, 8] and up in [-2, 2] of n elements; `gated` (a kernel
  // run on the pool) gives act(gate) * up within 1e-5 relative, plus
  // `up_slack` * |up| (GELU's tanh approximation near 0).
  void expect_gated_activation(int64_t n, const std::function<void(const float*, const float*, float*, int64_t)>& gated,
                               double (*act)(double), double up_slack, std::vector<float>& g, std::vector<float>& u) {
    g = random_floats(n, rng_, -8, 8);
    u = random_floats(n, rng_, -2, 2);
    std::vector<float> out = poisoned(n);
    gated(g.data(), u.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = act(g[i]) * u[i];
      ASSERT_LE(std::fabs(out[i] - ref), 1e-5 * std::fabs(ref) + up_slack * std::fabs(u[i]) + 1e-30)
          << "i=" << i << " gate " << g[i];
    }
  }

  std::mt19937_64 rng_;
  ThreadPool pool3_{3};
};

double matmul_tol(GgmlType t) { return t == GgmlType::Q4_1 ? 4e-5 : 1e-5; }

TEST_F(CpuKernelsTest, RowKernelsMatchExactDecodingOnBothIsas) {
  for (GgmlType type : all_weight_types()) {
    for (int64_t n : {1, 7, 8, 31, 32, 33, 64, 96, 256, 257, 544, 1056, 2304}) {
      if (n % ggml_type_traits(type).block_elems != 0) continue;
      const Weight w = random_weight(type, 1, n, rng_);
      const std::vector<float> x = random_floats(n, rng_);
      double ref = 0, abs_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        ref += w.exact[i] * x[i];
        abs_sum += std::fabs(w.exact[i] * x[i]);
      }
      std::vector<cpu::RowKernels> impls = {cpu::generic::row_kernels(type)};
      if (cpu::avx2::supported()) impls.push_back(cpu::avx2::row_kernels(type));
      if (cpu::avx512::supported()) impls.push_back(cpu::avx512::row_kernels(type));
      for (const cpu::RowKernels& k : impls) {
        EXPECT_LE(std::fabs(k.dot(w.bytes.data(), x.data(), n) - ref), matmul_tol(type) * abs_sum)
            << ggml_type_traits(type).name << " n=" << n;
        std::vector<float> dec = poisoned(n);
        k.decode(w.bytes.data(), 0, n, dec.data());
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(decoded_exactly(dec[i], w.exact[i])) << ggml_type_traits(type).name << " i=" << i << " got " << dec[i]
                                                           << " exact " << w.exact[i];
        }
      }
    }
  }
}

// The multi-row kernels (dot_rows) of every ISA that has them: row counts
// around the group size, widths with and without a partial vector, below and
// above the width where the AVX-512 kernels switch to several rows per pass.
TEST_F(CpuKernelsTest, DotRowsMatchExactDecodingOnEveryIsa) {
  int checked = 0;
  for (GgmlType type : all_weight_types()) {
    std::vector<cpu::RowKernels> impls = {cpu::row_kernels(type)};
    if (cpu::avx512::supported()) impls.push_back(cpu::avx512::row_kernels(type));
    for (int64_t n : {7, 32, 33, 96, 256, 544, 1056, 4128, 8224, 8448, 12327}) {
      if (n % ggml_type_traits(type).block_elems != 0) continue;
      for (int64_t rows : {1, 3, 4, 5, 8, 9}) {
        const Weight w = random_weight(type, rows, n, rng_);
        const std::vector<float> x = random_floats(n, rng_);
        const uint64_t row_bytes = ggml_row_bytes(ggml_type_traits(type), n);
        for (const cpu::RowKernels& k : impls) {
          if (!k.dot_rows) continue;
          std::vector<float> y = poisoned(rows);
          k.dot_rows(w.bytes.data(), row_bytes, rows, x.data(), n, y.data());
          ++checked;
          for (int64_t r = 0; r < rows; ++r) {
            double ref = 0, abs_sum = 0;
            for (int64_t i = 0; i < n; ++i) {
              ref += w.exact[r * n + i] * x[i];
              abs_sum += std::fabs(w.exact[r * n + i] * x[i]);
            }
            ASSERT_LE(std::fabs(y[r] - ref), matmul_tol(type) * abs_sum)
                << ggml_type_traits(type).name << " n=" << n << " rows=" << rows << " r=" << r;
          }
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no ISA with multi-row kernels on this CPU";
}

TEST_F(CpuKernelsTest, MatmulEveryWeightTypeAndShape) {
  const std::vector<MatmulShape> shapes = {{1, 32, 1},   {7, 64, 1},   {33, 96, 3}, {130, 320, 5},
                                           {65, 1024, 1}, {5, 17, 2},  {9, 33, 1},  {3, 1, 4}, {17, 160, 9}, {3, 8256, 1}, {2, 12320, 1},
                                           {5, 256, 1}, {9, 512, 3},   {17, 768, 9}, {3, 8448, 1}};
  for_each_matmul_case(shapes, rng_, [&](GgmlType type, const MatmulShape& s, const Weight& w,
                                         const std::vector<float>& x) {
    std::vector<double> ref, abs_sum;
    ref_matmul(w, to_double(x), s.n_tok, ref, &abs_sum);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool3_}) {
      std::vector<float> y = poisoned(s.n_out * s.n_tok);
      MatmulParams p{w.bytes.data(), type, s.n_out, s.n_in, x.data(), s.n_tok, y.data()};
      LS_ASSERT_OK(validate(p));
      cpu::matmul(p, pool);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_LE(std::fabs(y[i] - ref[i]), matmul_tol(type) * abs_sum[i])
            << ggml_type_traits(type).name << " " << s.n_out << "x" << s.n_in << " tokens " << s.n_tok << " i=" << i;
      }
    }
  });
}

TEST_F(CpuKernelsTest, MatmulRejectsBadShapes) {
  std::vector<uint8_t> w(34 * 4);
  std::vector<float> x(48), y(4);
  MatmulParams p{w.data(), GgmlType::Q8_0, 2, 48, x.data(), 1, y.data()};
  Status s = validate(p);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("48"), std::string::npos) << s.message();
  p.n_in = 32;
  p.w_type = GgmlType::IQ2_XXS;
  EXPECT_TRUE(validate(p).IsUnsupported());
}

TEST_F(CpuKernelsTest, RmsNorm) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {4, 64}, {5, 4099}}) {
    const std::vector<float> x = random_floats(rows * cols, rng_, -3, 3), w = random_floats(cols, rng_, 0.5, 1.5);
    std::vector<double> ref = to_double(x);
    ref_rmsnorm(ref, to_double(w), rows, cols, 1e-5);
    std::vector<float> out = poisoned(rows * cols);
    cpu::rmsnorm({x.data(), w.data(), out.data(), rows, cols, 1e-5f}, &pool3_);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_LE(std::fabs(out[i] - ref[i]), 1e-5 * std::fabs(ref[i]) + 1e-30);
    // In place.
    std::vector<float> inplace = x;
    cpu::rmsnorm({inplace.data(), w.data(), inplace.data(), rows, cols, 1e-5f}, nullptr);
    EXPECT_EQ(inplace, out);
  }
}

TEST_F(CpuKernelsTest, RopeBothLayouts) {
  struct Case {
    int64_t n_tok, n_heads, head_dim, n_rot;
    float base, scale;
    bool neox;
  };
  for (const Case& c : {Case{1, 1, 2, 0, 10000, 1, false}, Case{3, 4, 16, 0, 10000, 1, false},
                        Case{5, 3, 64, 32, 500000, 0.25f, false}, Case{4, 2, 16, 0, 10000, 1, true},
                        Case{2, 5, 128, 96, 1e6f, 0.5f, true}}) {
    std::vector<int32_t> pos(c.n_tok);
    for (auto& p : pos) p = static_cast<int32_t>(rng_() % 3000);
    const std::vector<float> x = random_floats(c.n_tok * c.n_heads * c.head_dim, rng_);
    std::vector<double> ref = to_double(x);
    const int64_t n_rot = c.n_rot ? c.n_rot : c.head_dim;
    ref_rope(ref, c.n_tok, c.n_heads, c.head_dim, n_rot, pos, c.base, c.scale, c.neox);
    std::vector<float> got = x;
    RopeParams p{got.data(), c.n_tok, c.n_heads, c.head_dim, c.n_rot, pos.data(), c.base, c.scale, c.neox};
    LS_ASSERT_OK(validate(p));
    cpu::rope(p, &pool3_);
    for (int64_t t = 0; t < c.n_tok; ++t) {
      const double tol = 1e-6 + 4e-7 * pos[t] * c.scale;
      for (int64_t i = 0; i < c.n_heads * c.head_dim; ++i) {
        const size_t k = t * c.n_heads * c.head_dim + i;
        ASSERT_LE(std::fabs(got[k] - ref[k]), tol * std::sqrt(2.0)) << "token " << t << " elem " << i;
      }
    }
    // Dims past n_rot are untouched.
    for (int64_t d = n_rot; d < c.head_dim; ++d) EXPECT_EQ(got[d], x[d]);
  }
}

// Llama 3.1 frequency factors divide each pair's angle.
TEST_F(CpuKernelsTest, RopeFrequencyFactors) {
  for (bool neox : {false, true}) {
    const int64_t n_tok = 4, n_heads = 3, head_dim = 32;
    std::vector<int32_t> pos(n_tok);
    for (auto& p : pos) p = static_cast<int32_t>(rng_() % 3000);
    std::vector<float> ff = random_floats(head_dim / 2, rng_, 1, 40);
    const std::vector<float> x = random_floats(n_tok * n_heads * head_dim, rng_);
    std::vector<double> ref = to_double(x);
    ref_rope(ref, n_tok, n_heads, head_dim, head_dim, pos, 500000, 1, neox, &ff);
    std::vector<float> got = x;
    RopeParams p{got.data(), n_tok, n_heads, head_dim, 0, pos.data(), 500000, 1, neox, ff.data()};
    LS_ASSERT_OK(validate(p));
    cpu::rope(p, &pool3_);
    for (int64_t t = 0; t < n_tok; ++t) {
      const double tol = (1e-6 + 4e-7 * pos[t]) * std::sqrt(2.0);
      for (int64_t i = 0; i < n_heads * head_dim; ++i) {
        const size_t k = t * n_heads * head_dim + i;
        ASSERT_LE(std::fabs(got[k] - ref[k]), tol) << "token " << t << " elem " << i;
      }
    }
    // The factors change the result (they are not ignored).
    std::vector<float> plain = x;
    cpu::rope({plain.data(), n_tok, n_heads, head_dim, 0, pos.data(), 500000, 1, neox}, nullptr);
    EXPECT_NE(plain, got);
  }
}

TEST_F(CpuKernelsTest, GeluMulAndScale) {
  for (int64_t n : {1, 31, 5000, 40000}) {
    std::vector<float> g, u;
    expect_gated_activation(
        n, [&](const float* gate, const float* up, float* out, int64_t len) { cpu::gelu_mul({gate, up, out, len}, &pool3_); },
        ref_gelu_tanh, 1e-6, g, u);
    ASSERT_FALSE(HasFatalFailure());
    const float factor = static_cast<float>(std::sqrt(640.0));
    std::vector<float> scaled = poisoned(n);
    cpu::scale({g.data(), scaled.data(), n, factor}, &pool3_);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = double(g[i]) * factor;
      ASSERT_LE(std::fabs(scaled[i] - ref), 1e-6 * std::fabs(ref) + 1e-30) << i;
    }
  }
  std::vector<float> x(4);
  EXPECT_TRUE(validate(ScaleParams{x.data(), x.data(), 4, NAN}).IsInvalidArgument());
  EXPECT_TRUE(validate(GeluMulParams{x.data(), nullptr, x.data(), 4}).IsInvalidArgument());
}

TEST_F(CpuKernelsTest, SiluMulAndAdd) {
  for (int64_t n : {1, 31, 5000, 40000}) {
    std::vector<float> g, u;
    expect_gated_activation(
        n, [&](const float* gate, const float* up, float* out, int64_t len) { cpu::silu_mul({gate, up, out, len}, &pool3_); },
        ref_silu, 0, g, u);
    ASSERT_FALSE(HasFatalFailure());
    std::vector<float> sum = poisoned(n);
    cpu::add({g.data(), u.data(), sum.data(), n}, &pool3_);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_LE(std::fabs(sum[i] - (double(g[i]) + u[i])), 1e-6 * (std::fabs(g[i]) + std::fabs(u[i]))) << i;
    }
  }
}

// Both implementations of the gated activations directly: the AVX-512 one
// (what cpu::silu_mul / gelu_mul take on this CPU, every tail length 1..33
// through its masked loads) and the scalar math a CPU without AVX-512 takes,
// against float64 on fresh random inputs plus the tails of the sigmoid
// (+-30, +-100, where exp over- or underflows) and zero.
TEST_F(CpuKernelsTest, GatedActivationsBothPathsMatchFloat64) {
  for (int64_t n = 1; n <= 33; ++n) {
    std::vector<float> g = random_floats(n, rng_, -10, 10), u = random_floats(n, rng_, -2, 2);
    const float extremes[] = {0.0f, 30.0f, -30.0f, 100.0f, -100.0f, 1e-20f};
    g[rng_() % n] = extremes[rng_() % 6];
    for (int which = 0; which < 2; ++which) {
      std::vector<double> ref(n);
      std::vector<float> scalar(n);
      for (int64_t i = 0; i < n; ++i) {
        ref[i] = (which == 0 ? ref_silu(g[i]) : ref_gelu_tanh(g[i])) * u[i];
        scalar[i] = which == 0 ? math::silu_mul(g[i], u[i]) : math::gelu_mul(g[i], u[i]);
        ASSERT_LE(std::fabs(scalar[i] - ref[i]), 1e-5 * std::fabs(ref[i]) + 1e-6 * std::fabs(u[i]) + 1e-30)
            << (which ? "gelu" : "silu") << " scalar g=" << g[i];
      }
      if (!cpu::avx512::supported()) continue;
      std::vector<float> simd = poisoned(n + 1);  // one past the end must stay untouched
      (which == 0 ? cpu::avx512::silu_mul : cpu::avx512::gelu_mul)(g.data(), u.data(), simd.data(), n);
      // gelu: plus 1e-6 |u| absolute, as GeluMulAndScale: the float64
      // reference's 1 + tanh cancels where gelu(g) ~ 0 (g < -5).
      for (int64_t i = 0; i < n; ++i)
        ASSERT_LE(std::fabs(simd[i] - ref[i]), 1e-5 * std::fabs(ref[i]) + (which ? 1e-6 * std::fabs(u[i]) : 0) + 1e-30)
            << (which ? "gelu" : "silu") << " avx512 n=" << n << " g=" << g[i] << " got " << simd[i] << " want " << ref[i];
      EXPECT_TRUE(std::isnan(simd[n])) << "wrote past the end";
    }
  }
}

TEST_F(CpuKernelsTest, EmbeddingEveryType) {
  for (GgmlType type : all_weight_types()) {
    const int64_t n_vocab = 37;
    const int64_t n_embd = ggml_type_traits(type).block_elems == 256 ? 512 : (is_block_type(type) ? 96 : 45);
    const Weight table = random_weight(type, n_vocab, n_embd, rng_);
    std::vector<int32_t> tokens = {0, static_cast<int32_t>(n_vocab - 1), 5, 5, static_cast<int32_t>(rng_() % n_vocab)};
    std::vector<float> out = poisoned(tokens.size() * n_embd);
    LS_ASSERT_OK(cpu::embedding({table.bytes.data(), type, n_vocab, n_embd, tokens.data(),
                                 static_cast<int64_t>(tokens.size()), out.data()},
                                &pool3_));
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (int64_t i = 0; i < n_embd; ++i) {
        ASSERT_TRUE(decoded_exactly(out[t * n_embd + i], table.exact[tokens[t] * n_embd + i])) << ggml_type_traits(type).name;
      }
    }
    tokens[2] = static_cast<int32_t>(n_vocab);
    Status s = cpu::embedding({table.bytes.data(), type, n_vocab, n_embd, tokens.data(), 5, out.data()}, nullptr);
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_NE(s.message().find(std::to_string(n_vocab)), std::string::npos) << s.message();
  }
}

// Attention for prefill (several tokens on an existing prefix) and decode, F32 and F16 caches.
TEST_F(CpuKernelsTest, AttentionPrefillAndDecode) {
  struct Case {
    int64_t start_pos, n_tok, n_head, n_kv, d;
  };
  for (GgmlType kv_type : {GgmlType::F32, GgmlType::F16}) {
    for (const Case& c : {Case{0, 1, 1, 1, 1}, Case{0, 7, 4, 2, 16}, Case{5, 1, 8, 2, 64}, Case{9, 4, 6, 3, 40},
                          Case{30, 1, 4, 4, 128}}) {
      const int64_t n_ctx = c.start_pos + c.n_tok + 3, row = c.n_kv * c.d;
      const size_t esz = kv_type == GgmlType::F32 ? 4 : 2;
      // Cache prefix (positions < start_pos) random; new rows given to the kernel.
      std::vector<float> k_all = random_floats(n_ctx * row, rng_), v_all = random_floats(n_ctx * row, rng_, -2, 2);
      std::vector<uint8_t> kc(n_ctx * row * esz, 0xFF), vc(n_ctx * row * esz, 0xFF);  // NaN/garbage beyond
      std::vector<double> k_ref(n_ctx * row), v_ref(n_ctx * row);
      for (int64_t i = 0; i < n_ctx * row; ++i) {
        if (kv_type == GgmlType::F16) {
          const uint16_t kh = math::f32_to_f16(k_all[i]), vh = math::f32_to_f16(v_all[i]);
          k_ref[i] = math::f16_to_f32(kh);
          v_ref[i] = math::f16_to_f32(vh);
          if (i < c.start_pos * row) {
            std::memcpy(&kc[i * 2], &kh, 2);
            std::memcpy(&vc[i * 2], &vh, 2);
          }
        } else {
          k_ref[i] = k_all[i];
          v_ref[i] = v_all[i];
          if (i < c.start_pos * row) {
            std::memcpy(&kc[i * 4], &k_all[i], 4);
            std::memcpy(&vc[i * 4], &v_all[i], 4);
          }
        }
      }
      const std::vector<float> q = random_floats(c.n_tok * c.n_head * c.d, rng_, -2, 2);
      std::vector<float> out = poisoned(q.size());
      AttentionParams p = attention_params({n_ctx, c.start_pos, c.n_tok, c.n_head, c.n_kv, c.d}, q.data(),
                                           k_all.data() + c.start_pos * row, v_all.data() + c.start_pos * row,
                                           kc.data(), vc.data(), out.data());
      p.kv_type = kv_type;
      LS_ASSERT_OK(validate(p));
      cpu::attention(p, &pool3_);
      const std::vector<double> ref =
          ref_attention(to_double(q), k_ref, v_ref, c.start_pos, c.n_tok, c.n_head, c.n_kv, c.d);
      double vmax = 0;
      for (double v : v_ref) vmax = std::max(vmax, std::fabs(v));
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_LE(std::fabs(out[i] - ref[i]), 1e-5 * vmax) << "kv " << ggml_type_traits(kv_type).name << " i=" << i;
      }
      // The new rows were stored at their positions.
      for (int64_t i = c.start_pos * row; i < (c.start_pos + c.n_tok) * row; ++i) {
        const double kv = kv_type == GgmlType::F16 ? spec_half(&kc[i * 2]) : spec_element(GgmlType::F32, kc.data(), i);
        ASSERT_EQ(kv, k_ref[i]);
      }
    }
  }
}

// Sliding-window attention (Gemma's local layers) with an explicit scale:
// prefill across the window boundary and decode far past it.
TEST_F(CpuKernelsTest, AttentionSlidingWindow) {
  struct Case {
    int64_t start_pos, n_tok, window;
  };
  const int64_t n_head = 4, n_kv = 2, d = 32, row = n_kv * d;
  for (const Case& c : {Case{0, 12, 5}, Case{7, 6, 4}, Case{40, 1, 16}, Case{3, 2, 1}, Case{10, 3, 64}}) {
    const int64_t n_ctx = c.start_pos + c.n_tok;
    std::vector<float> k_all = random_floats(n_ctx * row, rng_), v_all = random_floats(n_ctx * row, rng_, -2, 2);
    std::vector<float> kc(n_ctx * row, NAN), vc(n_ctx * row, NAN);
    // Prefix positions inside any window hold real data; those outside are
    // NaN too, so reading them would poison the output.
    for (int64_t i = 0; i < c.start_pos * row; ++i) {
      const int64_t pos = i / row;
      if (c.start_pos - pos < c.window + c.n_tok) {
        kc[i] = k_all[i];
        vc[i] = v_all[i];
      }
    }
    const std::vector<float> q = random_floats(c.n_tok * n_head * d, rng_, -2, 2);
    std::vector<float> out = poisoned(q.size());
    AttentionParams p = attention_params({n_ctx, c.start_pos, c.n_tok, n_head, n_kv, d}, q.data(),
                                         k_all.data() + c.start_pos * row, v_all.data() + c.start_pos * row,
                                         kc.data(), vc.data(), out.data());
    p.scale = 0.0625f;
    p.window = c.window;
    LS_ASSERT_OK(validate(p));
    cpu::attention(p, &pool3_);
    const std::vector<double> ref =
        ref_attention(to_double(q), to_double(k_all), to_double(v_all), c.start_pos, c.n_tok, n_head, n_kv, d,
                      c.window, 0.0625);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_LE(std::fabs(out[i] - ref[i]), 2e-5) << "window " << c.window << " i=" << i;
  }
  AttentionParams bad;
  std::vector<float> buf(64);
  bad.q = buf.data();
  bad.k_cache = bad.v_cache = buf.data();
  bad.out = buf.data() + 32;
  bad.n_ctx = bad.n_tokens = bad.n_head = bad.n_kv_head = 1;
  bad.head_dim = 16;
  bad.window = -1;
  EXPECT_TRUE(validate(bad).IsInvalidArgument());
}

// Attention sinks (gpt-oss): one more logit per head in the softmax's
// denominator. Sinks from far below the scores (no effect) to far above
// (the outputs shrink towards 0), on prefill, short decode and the split
// decode path (kSplitPositions + 9 positions), with and without a window.
TEST_F(CpuKernelsTest, AttentionSinksJoinTheDenominator) {
  struct Case {
    int64_t start_pos, n_tok, window;
  };
  const int64_t n_head = 4, n_kv = 2, d = 32, row = n_kv * d;
  for (const Case& c : {Case{0, 7, 0}, Case{5, 3, 4}, Case{9, 1, 0}, Case{cpu::kSplitPositions + 8, 1, 0},
                        Case{cpu::kSplitPositions + 8, 1, 100}}) {
    const int64_t n_ctx = c.start_pos + c.n_tok;
    const std::vector<float> k_all = random_floats(n_ctx * row, rng_), v_all = random_floats(n_ctx * row, rng_, -2, 2);
    std::vector<float> kc = k_all, vc = v_all;
    const std::vector<float> q = random_floats(c.n_tok * n_head * d, rng_, -2, 2);
    std::vector<float> sinks = random_floats(n_head, rng_, -3, 3);
    sinks[0] = -40.0f;  // no effect
    sinks[1] = 30.0f;   // dominates every score
    std::vector<float> out = poisoned(q.size());
    AttentionParams p = attention_params({n_ctx, c.start_pos, c.n_tok, n_head, n_kv, d}, q.data(),
                                         k_all.data() + c.start_pos * row, v_all.data() + c.start_pos * row,
                                         kc.data(), vc.data(), out.data());
    p.window = c.window;
    p.sinks = sinks.data();
    LS_ASSERT_OK(validate(p));
    cpu::attention(p, &pool3_);
    const std::vector<double> ref = ref_attention(to_double(q), to_double(k_all), to_double(v_all), c.start_pos,
                                                  c.n_tok, n_head, n_kv, d, c.window, 0, to_double(sinks));
    const std::vector<double> no_sink =
        ref_attention(to_double(q), to_double(k_all), to_double(v_all), c.start_pos, c.n_tok, n_head, n_kv, d, c.window);
    double moved = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_LE(std::fabs(out[i] - ref[i]), 4e-5) << "start " << c.start_pos << " i=" << i;
      moved = std::max(moved, std::fabs(ref[i] - no_sink[i]));
    }
    EXPECT_GT(moved, 1e-2) << "the sinks changed nothing";
  }
}

// One token over a long context takes the split path (attention_split.h):
// chunks of kSplitPositions positions with partial softmaxes merged at the
// end. Context lengths around the chunk size (one chunk: not split; a
// partial last chunk), sliding windows that start mid-chunk, F32 and F16
// caches, single- and multi-threaded; queries scaled up so that the chunks'
// maxima differ by tens (the merge's rescaling by e^(m_c - M) matters), and
// a spike: one position far above the others, in the last chunk.
TEST_F(CpuKernelsTest, AttentionSplitDecodeMergesChunksExactly) {
  struct Case {
    int64_t n_pos, window, n_head, n_kv, d;
    float q_scale;
    bool spike;
  };
  ASSERT_TRUE(cpu::use_attention_split(AttentionParams{.n_tokens = 1}, cpu::kSplitPositions + 1));
  ASSERT_FALSE(cpu::use_attention_split(AttentionParams{.n_tokens = 1}, cpu::kSplitPositions));
  ASSERT_FALSE(cpu::use_attention_split(AttentionParams{.n_tokens = 2}, 4 * cpu::kSplitPositions));
  const int64_t c = cpu::kSplitPositions;
  for (GgmlType kv_type : {GgmlType::F32, GgmlType::F16}) {
    for (const Case& cs : {Case{c, 0, 4, 2, 64, 1, false}, Case{c + 1, 0, 8, 2, 64, 1, false},
                           Case{3 * c + 17, 0, 8, 4, 128, 4, false}, Case{2 * c, 0, 2, 1, 40, 8, true},
                           Case{5 * c + 3, 2 * c + 5, 6, 3, 32, 2, true}, Case{700, 0, 4, 4, 256, 1, true}}) {
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool3_}) {
        const int64_t start_pos = cs.n_pos - 1 + (cs.window ? 3 * c : 0);  // windowed: positions before it too
        const int64_t n_ctx = start_pos + 1, row = cs.n_kv * cs.d;
        const size_t esz = kv_type == GgmlType::F32 ? 4 : 2;
        std::vector<float> k_all = random_floats(n_ctx * row, rng_), v_all = random_floats(n_ctx * row, rng_, -2, 2);
        if (cs.spike) {
          for (int64_t kvh = 0; kvh < cs.n_kv; ++kvh)
            for (int64_t dd = 0; dd < cs.d; ++dd) k_all[(start_pos - 2) * row + kvh * cs.d + dd] *= 12.0f;
        }
        const int64_t first = cs.window ? start_pos - cs.window + 1 : 0;
        std::vector<uint8_t> kc(n_ctx * row * esz), vc(n_ctx * row * esz);
        std::vector<double> k_ref(n_ctx * row), v_ref(n_ctx * row);
        for (int64_t i = 0; i < n_ctx * row; ++i) {
          const bool outside = i / row < first;  // NaN outside the window: reading it poisons the output
          if (kv_type == GgmlType::F16) {
            const uint16_t kh = math::f32_to_f16(k_all[i]), vh = math::f32_to_f16(v_all[i]);
            k_ref[i] = math::f16_to_f32(kh);
            v_ref[i] = math::f16_to_f32(vh);
            const uint16_t nan = 0x7E00;
            std::memcpy(&kc[i * 2], outside ? &nan : &kh, 2);
            std::memcpy(&vc[i * 2], outside ? &nan : &vh, 2);
          } else {
            k_ref[i] = k_all[i];
            v_ref[i] = v_all[i];
            const float kv[2] = {outside ? NAN : k_all[i], outside ? NAN : v_all[i]};
            std::memcpy(&kc[i * 4], &kv[0], 4);
            std::memcpy(&vc[i * 4], &kv[1], 4);
          }
        }
        std::vector<float> q = random_floats(cs.n_head * cs.d, rng_, -2, 2);
        for (float& x : q) x *= cs.q_scale;
        std::vector<float> out = poisoned(q.size());
        // The new row is in the cache already (k_new null).
        AttentionParams p = attention_params({n_ctx, start_pos, 1, cs.n_head, cs.n_kv, cs.d}, q.data(), nullptr,
                                             nullptr, kc.data(), vc.data(), out.data());
        p.kv_type = kv_type;
        p.window = cs.window;
        LS_ASSERT_OK(validate(p));
        cpu::attention(p, pool);
        const std::vector<double> ref =
            ref_attention(to_double(q), k_ref, v_ref, start_pos, 1, cs.n_head, cs.n_kv, cs.d, cs.window);
        double vmax = 0;
        for (double v : v_ref) vmax = std::max(vmax, std::fabs(v));
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_LE(std::fabs(out[i] - ref[i]), 2e-5 * vmax)
              << "kv " << ggml_type_traits(kv_type).name << " n_pos " << cs.n_pos << " window " << cs.window
              << " pool " << (pool != nullptr) << " i=" << i;
        }
      }
    }
  }
}

TEST_F(CpuKernelsTest, AttentionRejectsOverflowingPositions) {
  std::vector<float> q(16), out(16), kc(64), vc(64);
  const AttentionParams p = attention_params({.n_ctx = 4, .start_pos = 3, .n_tokens = 2, .n_head = 1, .n_kv_head = 1,
                                               .head_dim = 16},
                                              q.data(), nullptr, nullptr, kc.data(), vc.data(), out.data());
  Status s = validate(p);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("n_ctx = 4"), std::string::npos) << s.message();
}

TEST_F(CpuKernelsTest, GreedyPicksArgmaxLowestOnTies) {
  std::vector<float> logits = random_floats(1000, rng_, -5, 5);
  const int64_t a = rng_() % 500, b = 500 + rng_() % 500;
  logits[a] = logits[b] = 9.0f;
  EXPECT_EQ(cpu::sample(logits.data(), 1000, 0.0f, 0, 1.0f, rng_()), a);
  EXPECT_EQ(cpu::sample(logits.data(), 1000, 0.8f, 1, 1.0f, rng_()), a);
}

TEST_F(CpuKernelsTest, TopKTopPSampleOnlyAllowedTokensWithTheRightFrequencies) {
  const int64_t n = 200;
  std::vector<float> logits = random_floats(n, rng_, -4, 0);
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng_);
  // Three leaders with probabilities ~0.45/0.33/0.22 within the top-3.
  logits[ids[0]] = 5.0f;
  logits[ids[1]] = 5.0f - std::log(0.45f / 0.33f);
  logits[ids[2]] = 5.0f - std::log(0.45f / 0.22f);
  const uint64_t base = rng_();
  const int draws = 3000;
  std::vector<int> count(n, 0);
  for (int i = 0; i < draws; ++i) {
    const int32_t t = cpu::sample(logits.data(), n, 1.0f, 3, 1.0f, base + i);
    ASSERT_EQ(t, cpu::sample(logits.data(), n, 1.0f, 3, 1.0f, base + i)) << "not deterministic";
    ++count[t];
  }
  double z = 0;
  for (int k = 0; k < 3; ++k) z += std::exp(static_cast<double>(logits[ids[k]]));
  for (int k = 0; k < 3; ++k) {
    const double pk = std::exp(static_cast<double>(logits[ids[k]])) / z;
    EXPECT_NEAR(count[ids[k]], pk * draws, 5 * std::sqrt(draws * pk * (1 - pk)));
  }
  EXPECT_EQ(count[ids[0]] + count[ids[1]] + count[ids[2]], draws);
  // top_p = 0.5 keeps the two leaders: within the top-3 they hold 0.45 < 0.5 <= 0.78.
  for (int i = 0; i < 500; ++i) {
    const int32_t t = cpu::sample(logits.data(), n, 1.0f, 3, 0.5f, base + i);
    EXPECT_TRUE(t == ids[0] || t == ids[1]) << t;
  }
}

TEST(ThreadPoolTest, CoversEveryIndexOnceUnderConcurrentCallers) {
  ThreadPool pool(4);
  std::vector<std::thread> callers;
  std::vector<std::vector<int>> hits(3, std::vector<int>(10007, 0));
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 5; ++rep) {
        pool.parallel_for(10007, 7, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) ++hits[c][i];
        });
      }
    });
  }
  for (auto& t : callers) t.join();
  for (const auto& h : hits) {
    for (int v : h) ASSERT_EQ(v, 5);
  }
}

}  // namespace
}  // namespace layerstream::kernels

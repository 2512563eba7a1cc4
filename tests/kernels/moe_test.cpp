// The mixture-of-experts router and FFN (kernels.h: MoeFfnParams) against
// float64 references on fresh random inputs.
// Tolerances: router weights 1e-5 relative (f32 exp of logit differences up
// to 12, whose rounding is ~1e-6 relative each, and a sum of up to 64
// terms); the FFN's outputs 1e-4 x (1 + max |ref|) on the exact path (f32
// accumulation of three matmuls), 3e-2 x (1 + max |ref|) on the int8 path
// (activations quantised to 8 bits before each expert matmul).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/math/activation.h"
#include "kernels/math/moe_router.h"
#include "tests/kernels/kernel_test_util.h"

namespace layerstream::kernels {
namespace {

using namespace testing;  // NOLINT: test file

// Softmax over the logits, the n_used most probable (ties: lower index), their probabilities renormalised.
void ref_route(const std::vector<double>& logits, int n_used, std::vector<int>& ids, std::vector<double>& weights) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(logits[i] - mx);
  for (double& v : p) v /= z;
  std::vector<int> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  ids.assign(order.begin(), order.begin() + n_used);
  double chosen = 0;
  for (int e : ids) chosen += p[e];
  weights.clear();
  for (int e : ids) weights.push_back(p[e] / chosen);
}

class MoeTest : public ::testing::Test {
 protected:
  void SetUp() override { rng_.seed(layerstream::testing::fresh_seed()); }
  std::mt19937_64 rng_;
  ThreadPool pool_{3};
};

TEST_F(MoeTest, RouterPicksTheMostProbableAndRenormalises) {
  for (int trial = 0; trial < 300; ++trial) {
    const int n_expert = 1 + static_cast<int>(rng_() % 64);
    const int n_used = 1 + static_cast<int>(rng_() % n_expert);
    const std::vector<float> logits = random_floats(n_expert, rng_, -6, 6);
    std::vector<int32_t> ids(n_used, -1);
    std::vector<float> w(n_used, -1);
    math::moe_route(logits.data(), n_expert, n_used, ids.data(), w.data());
    std::vector<int> want_ids;
    std::vector<double> want_w;
    ref_route(to_double(logits), n_used, want_ids, want_w);
    double sum = 0;
    for (int k = 0; k < n_used; ++k) {
      ASSERT_EQ(ids[k], want_ids[k]) << "pick " << k << " of " << n_used << " from " << n_expert;
      ASSERT_NEAR(w[k], want_w[k], 1e-5 * want_w[k] + 1e-12) << "pick " << k;
      sum += w[k];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

TEST_F(MoeTest, RouterTiesTakeTheLowerIndexAndNaNIsNeverChosen) {
  const std::vector<float> equal(8, 0.5f);
  std::vector<int32_t> ids(3);
  std::vector<float> w(3);
  math::moe_route(equal.data(), 8, 3, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 2}));
  for (float v : w) EXPECT_FLOAT_EQ(v, 1.0f / 3);
  const std::vector<float> with_nan = {NAN, -1.0f, 2.0f, NAN};
  math::moe_route(with_nan.data(), 4, 2, ids.data(), w.data());
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 1);
}

// gpt-oss's gate (llama.cpp's swiglu_oai), from its definition.
double ref_swiglu_oai(double g, double u) {
  const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
  return x / (1 + std::exp(-1.702 * x)) * (y + 1);
}

// y[r][:] += bias[e][:] (bias empty: nothing).
void add_ref_bias(std::vector<double>& y, const std::vector<float>& bias, int64_t e) {
  if (bias.empty()) return;
  for (size_t i = 0; i < y.size(); ++i) y[i] += bias[e * y.size() + i];
}

TEST_F(MoeTest, SwigluOaiClampsAsDefined) {
  const std::vector<float> g = random_floats(4000, rng_, -12, 12), u = random_floats(4000, rng_, -12, 12);
  for (size_t i = 0; i < g.size(); ++i) {
    const double want = ref_swiglu_oai(g[i], u[i]);
    ASSERT_NEAR(math::swiglu_oai(g[i], u[i]), want, 1e-6 * (1 + std::fabs(want))) << g[i] << ", " << u[i];
  }
  EXPECT_FLOAT_EQ(math::swiglu_oai(100.0f, 100.0f), static_cast<float>(ref_swiglu_oai(7, 7)));
  EXPECT_TRUE(std::isnan(math::swiglu_oai(NAN, 1.0f)));
}

// Random router and experts of `type`; the op against the float64 FFN. With
// `gpt_oss`: random biases on the router and every expert matrix, the clamped
// gate, and activations large enough for its clamps to bite.
void expect_moe_matches_reference(GgmlType type, bool exact, int64_t n_tokens, std::mt19937_64& rng,
                                  ThreadPool* pool, bool gpt_oss = false) {
  const int64_t n_embd = 64, n_ff = 96, n_expert = 6, n_used = 2;
  const Weight router = random_weight(GgmlType::F32, n_expert, n_embd, rng);
  std::vector<float> router_bias, gate_bias, up_bias, down_bias;
  if (gpt_oss) {
    router_bias = random_floats(n_expert, rng, -1, 1);
    gate_bias = random_floats(n_expert * n_ff, rng, -1, 1);
    up_bias = random_floats(n_expert * n_ff, rng, -1, 1);
    down_bias = random_floats(n_expert * n_embd, rng, -1, 1);
  }
  std::vector<Weight> gate, up, down;
  std::vector<uint8_t> gate_b, up_b, down_b;  // the 3-D tensors: one slice per expert, contiguous
  for (int64_t e = 0; e < n_expert; ++e) {
    gate.push_back(random_weight(type, n_ff, n_embd, rng, 0.3f));
    up.push_back(random_weight(type, n_ff, n_embd, rng, 0.3f));
    down.push_back(random_weight(type, n_embd, n_ff, rng, 0.3f));
    gate_b.insert(gate_b.end(), gate.back().bytes.begin(), gate.back().bytes.end());
    up_b.insert(up_b.end(), up.back().bytes.begin(), up.back().bytes.end());
    down_b.insert(down_b.end(), down.back().bytes.begin(), down.back().bytes.end());
  }
  const float amp = gpt_oss ? 8.0f : 1.0f;
  const std::vector<float> x = random_floats(n_tokens * n_embd, rng, -amp, amp);
  std::vector<float> out = poisoned(n_tokens * n_embd);
  std::vector<uint8_t> work(moe_work_bytes(n_tokens, n_embd, n_ff, n_expert, n_used));
  MoeFfnParams p{x.data(), n_tokens,       n_embd,         n_ff,      n_expert,       n_used,
                 router.bytes.data(), GgmlType::F32, gate_b.data(), type, up_b.data(), type,
                 down_b.data(), type};
  p.out = out.data();
  p.work = work.data();
  p.work_bytes = work.size();
  if (gpt_oss) set_gpt_oss_ffn(p, router_bias.data(), gate_bias.data(), up_bias.data(), down_bias.data());
  ASSERT_TRUE(validate(p).ok()) << validate(p).ToString();
  cpu::moe_ffn(p, pool, exact);

  const std::vector<double> xd = to_double(x);
  double max_ref = 0, max_err = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const std::vector<double> xt(xd.begin() + t * n_embd, xd.begin() + (t + 1) * n_embd);
    std::vector<double> logits, g, u, y;
    ref_matmul(router, xt, 1, logits);
    add_ref_bias(logits, router_bias, 0);
    std::vector<int> ids;
    std::vector<double> w;
    ref_route(logits, n_used, ids, w);
    std::vector<double> want(n_embd, 0);
    for (int k = 0; k < n_used; ++k) {
      ref_matmul(gate[ids[k]], xt, 1, g);
      ref_matmul(up[ids[k]], xt, 1, u);
      add_ref_bias(g, gate_bias, ids[k]);
      add_ref_bias(u, up_bias, ids[k]);
      for (int64_t i = 0; i < n_ff; ++i) g[i] = gpt_oss ? ref_swiglu_oai(g[i], u[i]) : ref_silu(g[i]) * u[i];
      ref_matmul(down[ids[k]], g, 1, y);
      add_ref_bias(y, down_bias, ids[k]);
      for (int64_t i = 0; i < n_embd; ++i) want[i] += w[k] * y[i];
    }
    for (int64_t i = 0; i < n_embd; ++i) {
      max_ref = std::max(max_ref, std::fabs(want[i]));
      max_err = std::max(max_err, std::fabs(want[i] - out[t * n_embd + i]));
    }
  }
  EXPECT_GT(max_ref, 1e-3) << "degenerate outputs";
  EXPECT_LE(max_err, (exact ? 1e-4 : 3e-2) * (1 + max_ref))
      << ggml_type_traits(type).name << (exact ? " exact" : " fast") << ", " << n_tokens << " tokens";
}

TEST_F(MoeTest, FfnMatchesFloat64OnBothPaths) {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (bool exact : {true, false}) {
      for (int64_t n_tokens : {1, 9}) expect_moe_matches_reference(type, exact, n_tokens, rng_, &pool_);
    }
  }
}

// gpt-oss: biases everywhere, the clamped gate, experts in MXFP4 as it ships them.
TEST_F(MoeTest, GptOssFfnWithBiasesMatchesFloat64OnBothPaths) {
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0, GgmlType::MXFP4}) {
    for (bool exact : {true, false}) {
      for (int64_t n_tokens : {1, 9}) expect_moe_matches_reference(type, exact, n_tokens, rng_, &pool_, /*gpt_oss=*/true);
    }
  }
}

TEST_F(MoeTest, BadParamsAreNamed) {
  float x[64] = {}, out[64] = {};
  char w[4] = {};
  MoeFfnParams p{x, 1, 64, 32, 4, 5, w, GgmlType::F32, w, GgmlType::F32, w, GgmlType::F32, w, GgmlType::F32};
  p.out = out;
  p.work = w;
  p.work_bytes = 1 << 20;
  Status st = validate(p);
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_NE(st.message().find("n_used = 5 exceeds n_expert = 4"), std::string::npos) << st.ToString();
  p.n_used = 2;
  p.work_bytes = 16;
  st = validate(p);
  EXPECT_NE(st.message().find("work_bytes = 16"), std::string::npos) << st.ToString();
  p.work_bytes = 1 << 20;
  p.down_type = GgmlType::Q8_0;
  p.n_ff = 40;
  st = validate(p);
  EXPECT_NE(st.message().find("n_ff = 40"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace layerstream::kernels

// A whole Llama block through the executor-facing interface (CpuKernels on a
// Stream) against a float64 reference block, for every weight type and both
// KV cache types: prefill of 5 tokens, then one decode step on that cache.
//   attn_norm -> q,k,v -> rope -> GQA attention (KV cache) -> wo -> +residual
//   -> ffn_norm -> gate, up -> silu(gate)*up -> down -> +residual
// Tolerance: |out - ref| <= tol * max|ref|, tol = 1e-4 with an F32 cache (f32
// rounding through ~10 chained ops), 3e-3 with an F16 cache (the kernel's and
// the reference's K/V may round to neighbouring halves: 2^-11 relative).
#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
#include "runtime/core/status_macros.h"
#include "tests/kernels/kernel_test_util.h"

namespace layerstream::kernels {
namespace {

using namespace testing;  // NOLINT: test file

constexpr int64_t kE = 64, kH = 4, kKV = 2, kD = 16, kF = 96, kCtx = 8;
constexpr float kEps = 1e-5f, kBase = 10000.0f, kScale = 0.5f;

struct BlockWeights {
  std::vector<float> attn_norm, ffn_norm;
  Weight wq, wk, wv, wo, wg, wu, wd;
};

// The float64 reference block with its own cache [pos][kv][d] (values as stored).
struct RefBlock {
  const BlockWeights& w;
  GgmlType kv_type;
  std::vector<double> k_cache = std::vector<double>(kCtx * kKV * kD), v_cache = std::vector<double>(kCtx * kKV * kD);

  double stored(double v) const {
    const float f = static_cast<float>(v);
    return kv_type == GgmlType::F16 ? math::f16_to_f32(math::f32_to_f16(f)) : f;
  }

  std::vector<double> run(const std::vector<double>& x, int64_t start, int64_t n) {
    std::vector<double> h = x, q, k, v, o, g, u, d;
    ref_rmsnorm(h, to_double(w.attn_norm), n, kE, kEps);
    ref_matmul(w.wq, h, n, q);
    ref_matmul(w.wk, h, n, k);
    ref_matmul(w.wv, h, n, v);
    std::vector<int32_t> pos(n);
    for (int64_t t = 0; t < n; ++t) pos[t] = static_cast<int32_t>(start + t);
    ref_rope(q, n, kH, kD, kD, pos, kBase, kScale, false);
    ref_rope(k, n, kKV, kD, kD, pos, kBase, kScale, false);
    for (int64_t i = 0; i < n * kKV * kD; ++i) {
      k_cache[start * kKV * kD + i] = stored(k[i]);
      v_cache[start * kKV * kD + i] = stored(v[i]);
    }
    const std::vector<double> attn = ref_attention(q, k_cache, v_cache, start, n, kH, kKV, kD);
    ref_matmul(w.wo, attn, n, o);
    std::vector<double> x2(n * kE);
    for (int64_t i = 0; i < n * kE; ++i) x2[i] = x[i] + o[i];
    std::vector<double> h2 = x2;
    ref_rmsnorm(h2, to_double(w.ffn_norm), n, kE, kEps);
    ref_matmul(w.wg, h2, n, g);
    ref_matmul(w.wu, h2, n, u);
    for (size_t i = 0; i < g.size(); ++i) g[i] = ref_silu(g[i]) * u[i];
    ref_matmul(w.wd, g, n, d);
    for (int64_t i = 0; i < n * kE; ++i) x2[i] += d[i];
    return x2;
  }
};

// The same block on a Kernels object; all buffers host memory.
struct KernelBlock {
  const BlockWeights& w;
  GgmlType kv_type;
  Kernels& k;
  Stream& s;
  std::vector<uint8_t> k_cache, v_cache;

  KernelBlock(const BlockWeights& w_, GgmlType t, Kernels& k_, Stream& s_)
      : w(w_), kv_type(t), k(k_), s(s_),
        k_cache(kCtx * kKV * kD * (t == GgmlType::F32 ? 4 : 2)), v_cache(k_cache.size()) {}

  Status mm(const Weight& wt, const std::vector<float>& x, int64_t n, std::vector<float>& y) {
    y = poisoned(n * wt.n_rows);
    return k.matmul({wt.bytes.data(), wt.type, wt.n_rows, wt.n_cols, x.data(), n, y.data()}, s);
  }

  Result<std::vector<float>> run(const std::vector<float>& x, int64_t start, int64_t n) {
    std::vector<float> h = poisoned(n * kE), q, kk, v, o, g, u, d;
    LS_RETURN_IF_ERROR(k.rmsnorm({x.data(), w.attn_norm.data(), h.data(), n, kE, kEps}, s));
    LS_RETURN_IF_ERROR(mm(w.wq, h, n, q));
    LS_RETURN_IF_ERROR(mm(w.wk, h, n, kk));
    LS_RETURN_IF_ERROR(mm(w.wv, h, n, v));
    std::vector<int32_t> pos(n);
    for (int64_t t = 0; t < n; ++t) pos[t] = static_cast<int32_t>(start + t);
    LS_RETURN_IF_ERROR(k.rope({q.data(), n, kH, kD, 0, pos.data(), kBase, kScale, false}, s));
    LS_RETURN_IF_ERROR(k.rope({kk.data(), n, kKV, kD, 0, pos.data(), kBase, kScale, false}, s));
    std::vector<float> attn = poisoned(n * kH * kD);
    AttentionParams ap = attention_params({kCtx, start, n, kH, kKV, kD}, q.data(), kk.data(), v.data(),
                                          k_cache.data(), v_cache.data(), attn.data());
    ap.kv_type = kv_type;
    LS_RETURN_IF_ERROR(k.attention(ap, s));
    LS_RETURN_IF_ERROR(mm(w.wo, attn, n, o));
    std::vector<float> x2 = poisoned(n * kE);
    LS_RETURN_IF_ERROR(k.add({x.data(), o.data(), x2.data(), n * kE}, s));
    std::vector<float> h2 = poisoned(n * kE);
    LS_RETURN_IF_ERROR(k.rmsnorm({x2.data(), w.ffn_norm.data(), h2.data(), n, kE, kEps}, s));
    LS_RETURN_IF_ERROR(mm(w.wg, h2, n, g));
    LS_RETURN_IF_ERROR(mm(w.wu, h2, n, u));
    LS_RETURN_IF_ERROR(k.silu_mul({g.data(), u.data(), g.data(), n * kF}, s));
    LS_RETURN_IF_ERROR(mm(w.wd, g, n, d));
    LS_RETURN_IF_ERROR(k.add({x2.data(), d.data(), x2.data(), n * kE}, s));
    LS_RETURN_IF_ERROR(s.synchronize());
    return x2;
  }
};

TEST(LlamaBlockTest, HostKernelsMatchFloat64BlockForEveryWeightType) {
  std::mt19937_64 rng(layerstream::testing::fresh_seed());
  KernelsOptions options;
  options.host_threads = 2;
  options.exact = true;  // f32 activations: the tolerance is for f32 rounding only
  LS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Kernels> kernels, make_kernels(BackendKind::kHost, options));
  InlineStream stream;
  for (GgmlType type : all_weight_types()) {
    // The 256-element block types need wider rows; they run in the runner tests (tests/llama).
    const int64_t be = ggml_type_traits(type).block_elems;
    if (kE % be || kF % be || (kH * kD) % be) continue;
    BlockWeights w{random_floats(kE, rng, 0.5f, 1.5f),
                   random_floats(kE, rng, 0.5f, 1.5f),
                   random_weight(type, kH * kD, kE, rng, 0.3f),
                   random_weight(type, kKV * kD, kE, rng, 0.3f),
                   random_weight(type, kKV * kD, kE, rng, 0.3f),
                   random_weight(type, kE, kH * kD, rng, 0.3f),
                   random_weight(type, kF, kE, rng, 0.3f),
                   random_weight(type, kF, kE, rng, 0.3f),
                   random_weight(type, kE, kF, rng, 0.3f)};
    for (GgmlType kv_type : {GgmlType::F32, GgmlType::F16}) {
      RefBlock ref{w, kv_type};
      KernelBlock blk(w, kv_type, *kernels, stream);
      const double tol = kv_type == GgmlType::F32 ? 1e-4 : 3e-3;
      const std::vector<float> prompt = random_floats(5 * kE, rng), next = random_floats(kE, rng);
      for (auto [x, start, n] : {std::tuple{&prompt, int64_t{0}, int64_t{5}}, std::tuple{&next, int64_t{5}, int64_t{1}}}) {
        const std::vector<double> want = ref.run(to_double(*x), start, n);
        LS_ASSERT_OK_AND_ASSIGN(std::vector<float> got, blk.run(*x, start, n));
        double mx = 0;
        for (double v : want) mx = std::max(mx, std::fabs(v));
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_LE(std::fabs(got[i] - want[i]), tol * mx)
              << ggml_type_traits(type).name << " kv " << ggml_type_traits(kv_type).name << " start " << start
              << " i=" << i;
        }
      }
    }
  }
}

TEST(LlamaBlockTest, ErrorsSurfaceThroughTheStream) {
  LS_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Kernels> kernels, make_kernels(BackendKind::kHost));
  InlineStream stream;
  std::vector<float> table(4 * 8, 1.0f), out(8);
  int32_t bad = 4;
  LS_ASSERT_OK(kernels->embedding({table.data(), GgmlType::F32, 4, 8, &bad, 1, out.data()}, stream));
  Status s = stream.synchronize();
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // Invalid params are refused at enqueue time.
  EXPECT_TRUE(kernels->rmsnorm({nullptr, table.data(), out.data(), 1, 8, 1e-5f}, stream).IsInvalidArgument());
  EXPECT_TRUE(make_kernels(BackendKind::kAuto).status().IsInvalidArgument());
}

}  // namespace
}  // namespace layerstream::kernels

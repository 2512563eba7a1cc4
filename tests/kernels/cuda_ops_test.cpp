// The CUDA kernels against the same float64 references as the CPU suite
// (skipped with the reason when no CUDA device can be used). Tolerances as in
// cpu_ops_test.cpp, except the cuBLAS paths at n_tokens > 8, which round x
// (and dequantised weights) to 16 bits: 2e-3 * sum|w x| for F16 and the
// quantised types, 8e-3 for BF16.
#include <algorithm>
#include <cmath>
#include <limits>

#include <tuple>

#include "kernels/cpu/ops.h"
#include "tests/common/gpu.h"
#include "tests/kernels/kernel_test_util.h"

#if defined(LAYERSTREAM_HAVE_CUDA_BACKEND)
#include <cuda_runtime.h>

namespace layerstream::kernels {
namespace {

using namespace testing;  // NOLINT: test file

// A bare cudaStream_t behind the Stream interface (the suite does not depend
// on the cuda device backend).
class TestCudaStream final : public Stream {
 public:
  TestCudaStream() { cudaStreamCreate(&s_); }
  ~TestCudaStream() override { cudaStreamDestroy(s_); }
  Status copy_h2d(void* d, const void* s, size_t n) override { return check(cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, s_)); }
  Status copy_d2h(void* d, const void* s, size_t n) override { return check(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToHost, s_)); }
  Status copy_d2d(void* d, const void* s, size_t n) override { return check(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, s_)); }
  Status record(Event&) override { return Status::Unsupported("test stream"); }
  Status wait(const Event&) override { return Status::Unsupported("test stream"); }
  Status host_func(std::function<Status()>) override { return Status::Unsupported("test stream"); }
  Status synchronize() override { return check(cudaStreamSynchronize(s_)); }
  void* native_handle() override { return s_; }

 private:
  static Status check(cudaError_t e) {
    return e == cudaSuccess ? Status::OK() : Status::DeviceError(cudaGetErrorString(e));
  }
  cudaStream_t s_ = nullptr;
};

// Device copy of a host vector; NaN-poisoned buffers via from(poisoned(n)).
struct Dev {
  void* p = nullptr;
  size_t bytes = 0;
  template <typename T>
  static Dev from(const std::vector<T>& v) {
    Dev d;
    d.bytes = v.size() * sizeof(T);
    cudaMalloc(&d.p, std::max<size_t>(d.bytes, 1));
    cudaMemcpy(d.p, v.data(), d.bytes, cudaMemcpyHostToDevice);
    return d;
  }
  template <typename T>
  std::vector<T> get() const {
    std::vector<T> v(bytes / sizeof(T));
    cudaMemcpy(v.data(), p, bytes, cudaMemcpyDeviceToHost);
    return v;
  }
  float* f() const { return static_cast<float*>(p); }
  Dev() = default;
  Dev(Dev&& o) noexcept : p(std::exchange(o.p, nullptr)), bytes(o.bytes) {}
  ~Dev() { if (p) cudaFree(p); }
};

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LS_REQUIRE_CUDA_DEVICE();
    rng_.seed(layerstream::testing::fresh_seed());
    auto k = make_kernels(BackendKind::kCuda);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    k_ = std::move(k).value();
  }
  std::mt19937_64 rng_;
  std::unique_ptr<Kernels> k_;
  TestCudaStream s_;
};

double gemm_tol(GgmlType t, int64_t n_tok) {
  if (n_tok <= 8 || t == GgmlType::F32) return t == GgmlType::Q4_1 ? 4e-5 : 1e-5;
  return t == GgmlType::BF16 ? 8e-3 : 2e-3;
}

TEST_F(CudaKernelsTest, MatmulEveryWeightTypeSmallAndLargeBatch) {
  const std::vector<MatmulShape> shapes = {{1, 32, 1}, {7, 64, 3},  {33, 96, 8},  {130, 320, 9}, {65, 1024, 33},
                                           {5, 17, 2}, {9, 33, 12}, {9, 256, 3}, {33, 512, 33}};
  for_each_matmul_case(shapes, rng_, [&](GgmlType type, const MatmulShape& s, const Weight& w,
                                         const std::vector<float>& x) {
    std::vector<double> ref, abs_sum;
    ref_matmul(w, to_double(x), s.n_tok, ref, &abs_sum);
    for (bool with_scratch : {false, true}) {
      Dev dw = Dev::from(w.bytes), dx = Dev::from(x), dy = Dev::from(poisoned(s.n_out * s.n_tok));
      const uint64_t need = k_->matmul_scratch_bytes(type, s.n_out, s.n_in, s.n_tok);
      Dev scratch = Dev::from(std::vector<uint8_t>(with_scratch ? need : 0));
      MatmulParams p{dw.p, type, s.n_out, s.n_in, dx.f(), s.n_tok, dy.f(), scratch.p, with_scratch ? need : 0};
      LS_ASSERT_OK(k_->matmul(p, s_));
      LS_ASSERT_OK(s_.synchronize());
      const std::vector<float> y = dy.get<float>();
      const double tol = with_scratch ? gemm_tol(type, s.n_tok) : gemm_tol(GgmlType::F32, 1) * (type == GgmlType::Q4_1 ? 4 : 1);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_LE(std::fabs(y[i] - ref[i]), tol * abs_sum[i])
            << ggml_type_traits(type).name << " " << s.n_out << "x" << s.n_in << " tok " << s.n_tok << " i " << i;
      }
    }
  });
}

TEST_F(CudaKernelsTest, RmsNormRopeSiluAddEmbedding) {
  const int64_t rows = 5, cols = 4099;
  const std::vector<float> x = random_floats(rows * cols, rng_, -3, 3), w = random_floats(cols, rng_, 0.5, 1.5);
  std::vector<double> ref = to_double(x);
  ref_rmsnorm(ref, to_double(w), rows, cols, 1e-5);
  Dev dx = Dev::from(x), dw = Dev::from(w), dout = Dev::from(poisoned(rows * cols));
  LS_ASSERT_OK(k_->rmsnorm({dx.f(), dw.f(), dout.f(), rows, cols, 1e-5f}, s_));
  LS_ASSERT_OK(s_.synchronize());
  std::vector<float> out = dout.get<float>();
  for (size_t i = 0; i < out.size(); ++i) ASSERT_LE(std::fabs(out[i] - ref[i]), 1e-5 * std::fabs(ref[i]) + 1e-30);

  for (bool neox : {false, true}) {
    const int64_t n_tok = 3, n_heads = 5, hd = 128, n_rot = 96;
    std::vector<int32_t> pos(n_tok);
    for (auto& p : pos) p = static_cast<int32_t>(rng_() % 3000);
    const std::vector<float> q = random_floats(n_tok * n_heads * hd, rng_);
    std::vector<double> rref = to_double(q);
    ref_rope(rref, n_tok, n_heads, hd, n_rot, pos, 1e6, 0.5, neox);
    Dev dq = Dev::from(q), dpos = Dev::from(pos);
    LS_ASSERT_OK(k_->rope({dq.f(), n_tok, n_heads, hd, n_rot, static_cast<int32_t*>(dpos.p), 1e6f, 0.5f, neox}, s_));
    LS_ASSERT_OK(s_.synchronize());
    const std::vector<float> got = dq.get<float>();
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t i = 0; i < n_heads * hd; ++i) {
        const size_t k = t * n_heads * hd + i;
        ASSERT_LE(std::fabs(got[k] - rref[k]), (1e-6 + 4e-7 * pos[t] * 0.5) * std::sqrt(2.0));
      }
    }
  }

  const int64_t n = 40001;
  const std::vector<float> g = random_floats(n, rng_, -8, 8), u = random_floats(n, rng_, -2, 2);
  Dev dg = Dev::from(g), du = Dev::from(u), dso = Dev::from(poisoned(n)), dsum = Dev::from(poisoned(n));
  LS_ASSERT_OK(k_->silu_mul({dg.f(), du.f(), dso.f(), n}, s_));
  LS_ASSERT_OK(k_->add({dg.f(), du.f(), dsum.f(), n}, s_));
  LS_ASSERT_OK(s_.synchronize());
  const std::vector<float> so = dso.get<float>(), sum = dsum.get<float>();
  for (int64_t i = 0; i < n; ++i) {
    const double r = ref_silu(g[i]) * u[i];
    ASSERT_LE(std::fabs(so[i] - r), 1e-5 * std::fabs(r) + 1e-30);
    ASSERT_LE(std::fabs(sum[i] - (double(g[i]) + u[i])), 1e-6 * (std::fabs(g[i]) + std::fabs(u[i])));
  }

  for (GgmlType type : all_weight_types()) {
    const int64_t n_vocab = 37;
    const int64_t n_embd = ggml_type_traits(type).block_elems == 256 ? 512 : (is_block_type(type) ? 96 : 45);
    const Weight table = random_weight(type, n_vocab, n_embd, rng_);
    const std::vector<int32_t> tokens = {0, 36, 5, 5, static_cast<int32_t>(rng_() % n_vocab)};
    Dev dt = Dev::from(table.bytes), dtok = Dev::from(tokens), de = Dev::from(poisoned(tokens.size() * n_embd));
    LS_ASSERT_OK(k_->embedding({dt.p, type, n_vocab, n_embd, static_cast<int32_t*>(dtok.p), 5, de.f()}, s_));
    LS_ASSERT_OK(s_.synchronize());
    const std::vector<float> e = de.get<float>();
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (int64_t i = 0; i < n_embd; ++i) {
        ASSERT_TRUE(decoded_exactly(e[t * n_embd + i], table.exact[tokens[t] * n_embd + i])) << ggml_type_traits(type).name;
      }
    }
  }
}

TEST_F(CudaKernelsTest, AttentionPrefillAndDecode) {
  for (GgmlType kv_type : {GgmlType::F32, GgmlType::F16}) {
    for (auto [start, n_tok, n_head, n_kv, d] : std::vector<std::array<int64_t, 5>>{
             {0, 7, 4, 2, 16}, {5, 1, 8, 2, 64}, {9, 4, 6, 3, 40}, {30, 1, 4, 4, 128}, {3, 2, 2, 1, 256}}) {
      const int64_t n_ctx = start + n_tok + 3, row = n_kv * d;
      std::vector<float> k_all = random_floats(n_ctx * row, rng_), v_all = random_floats(n_ctx * row, rng_, -2, 2);
      std::vector<double> k_ref(k_all.begin(), k_all.end()), v_ref(v_all.begin(), v_all.end());
      std::vector<uint8_t> kc, vc;
      for (int64_t i = 0; i < n_ctx * row; ++i) {
        if (kv_type == GgmlType::F16) {
          const uint16_t kh = math::f32_to_f16(k_all[i]), vh = math::f32_to_f16(v_all[i]);
          k_ref[i] = math::f16_to_f32(kh);
          v_ref[i] = math::f16_to_f32(vh);
          kc.insert(kc.end(), {uint8_t(kh), uint8_t(kh >> 8)});
          vc.insert(vc.end(), {uint8_t(vh), uint8_t(vh >> 8)});
        } else {
          kc.resize(kc.size() + 4);
          vc.resize(vc.size() + 4);
          std::memcpy(&kc[kc.size() - 4], &k_all[i], 4);
          std::memcpy(&vc[vc.size() - 4], &v_all[i], 4);
        }
      }
      // Poison the new positions in the cache; the kernel must store them.
      const size_t esz = kv_type == GgmlType::F32 ? 4 : 2;
      std::fill(kc.begin() + start * row * esz, kc.end(), 0xFF);
      std::fill(vc.begin() + start * row * esz, vc.end(), 0xFF);
      const std::vector<float> q = random_floats(n_tok * n_head * d, rng_, -2, 2);
      const std::vector<float> k_new(k_all.begin() + start * row, k_all.begin() + (start + n_tok) * row);
      const std::vector<float> v_new(v_all.begin() + start * row, v_all.begin() + (start + n_tok) * row);
      Dev dq = Dev::from(q), dkn = Dev::from(k_new), dvn = Dev::from(v_new), dkc = Dev::from(kc), dvc = Dev::from(vc),
          dout = Dev::from(poisoned(q.size()));
      AttentionParams p = attention_params({n_ctx, start, n_tok, n_head, n_kv, d}, dq.f(), dkn.f(), dvn.f(), dkc.p,
                                           dvc.p, dout.f());
      p.kv_type = kv_type;
      LS_ASSERT_OK(k_->attention(p, s_));
      LS_ASSERT_OK(s_.synchronize());
      const std::vector<float> out = dout.get<float>();
      const std::vector<double> ref = ref_attention(to_double(q), k_ref, v_ref, start, n_tok, n_head, n_kv, d);
      double vmax = 0;
      for (double v : v_ref) vmax = std::max(vmax, std::fabs(v));
      for (size_t i = 0; i < out.size(); ++i) ASSERT_LE(std::fabs(out[i] - ref[i]), 1e-5 * vmax) << i;
    }
  }
}

// The Gemma / Llama 3.1 additions: GELU-mul, scale, RoPE frequency factors,
// sliding-window attention with an explicit scale.
TEST_F(CudaKernelsTest, GeluMulScaleRopeFactorsSlidingWindow) {
  const int64_t n = 40001;
  const std::vector<float> g = random_floats(n, rng_, -8, 8), u = random_floats(n, rng_, -2, 2);
  Dev dg = Dev::from(g), du = Dev::from(u), dgo = Dev::from(poisoned(n)), dsc = Dev::from(poisoned(n));
  LS_ASSERT_OK(k_->gelu_mul({dg.f(), du.f(), dgo.f(), n}, s_));
  LS_ASSERT_OK(k_->scale({dg.f(), dsc.f(), n, 25.3f}, s_));
  LS_ASSERT_OK(s_.synchronize());
  const std::vector<float> go = dgo.get<float>(), sc = dsc.get<float>();
  for (int64_t i = 0; i < n; ++i) {
    const double r = ref_gelu_tanh(g[i]) * u[i];
    ASSERT_LE(std::fabs(go[i] - r), 1e-5 * std::fabs(r) + 1e-6 * std::fabs(u[i]) + 1e-30);
    ASSERT_LE(std::fabs(sc[i] - double(g[i]) * 25.3f), 1e-6 * std::fabs(double(g[i]) * 25.3f) + 1e-30);
  }

  const int64_t n_tok = 3, n_heads = 4, hd = 64;
  std::vector<int32_t> pos(n_tok);
  for (auto& p : pos) p = static_cast<int32_t>(rng_() % 3000);
  const std::vector<float> ff = random_floats(hd / 2, rng_, 1, 40), x = random_floats(n_tok * n_heads * hd, rng_);
  std::vector<double> rref = to_double(x);
  ref_rope(rref, n_tok, n_heads, hd, hd, pos, 500000, 1, false, &ff);
  Dev dx = Dev::from(x), dpos = Dev::from(pos), dff = Dev::from(ff);
  RopeParams rp{dx.f(), n_tok, n_heads, hd, 0, static_cast<int32_t*>(dpos.p), 500000, 1, false, dff.f()};
  LS_ASSERT_OK(k_->rope(rp, s_));
  LS_ASSERT_OK(s_.synchronize());
  const std::vector<float> rx = dx.get<float>();
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t i = 0; i < n_heads * hd; ++i)
      ASSERT_LE(std::fabs(rx[t * n_heads * hd + i] - rref[t * n_heads * hd + i]), (1e-6 + 4e-7 * pos[t]) * std::sqrt(2.0));

  for (auto [start, nt, window] : std::vector<std::array<int64_t, 3>>{{0, 12, 5}, {40, 1, 16}, {7, 6, 4}}) {
    const int64_t n_head = 4, n_kv = 2, d = 32, row = n_kv * d, n_ctx = start + nt;
    const std::vector<float> k_all = random_floats(n_ctx * row, rng_), v_all = random_floats(n_ctx * row, rng_, -2, 2);
    const std::vector<float> q = random_floats(nt * n_head * d, rng_, -2, 2);
    const std::vector<float> k_new(k_all.begin() + start * row, k_all.end()), v_new(v_all.begin() + start * row, v_all.end());
    Dev dq = Dev::from(q), dkn = Dev::from(k_new), dvn = Dev::from(v_new), dkc = Dev::from(k_all),
        dvc = Dev::from(v_all), dout = Dev::from(poisoned(q.size()));
    AttentionParams p = attention_params({n_ctx, start, nt, n_head, n_kv, d}, dq.f(), dkn.f(), dvn.f(), dkc.p, dvc.p,
                                         dout.f());
    p.scale = 0.0625f;
    p.window = window;
    // gpt-oss's sinks: one more logit per head in the denominator (one far above every score).
    std::vector<float> sinks = random_floats(n_head, rng_, -2, 2);
    sinks[1] = 25.0f;
    Dev dsinks = Dev::from(sinks);
    p.sinks = dsinks.f();
    LS_ASSERT_OK(k_->attention(p, s_));
    LS_ASSERT_OK(s_.synchronize());
    const std::vector<float> out = dout.get<float>();
    const std::vector<double> ref = ref_attention(to_double(q), to_double(k_all), to_double(v_all), start, nt, n_head,
                                                  n_kv, d, window, 0.0625, to_double(sinks));
    for (size_t i = 0; i < out.size(); ++i) ASSERT_LE(std::fabs(out[i] - ref[i]), 2e-5) << "window " << window;
  }
}

TEST_F(CudaKernelsTest, SamplingMatchesTheCpuSampler) {
  const int64_t n = 50000;
  std::vector<float> logits = random_floats(n, rng_, -5, 5);
  const int64_t a = rng_() % (n / 2), b = n / 2 + rng_() % (n / 2);
  logits[a] = logits[b] = 9.0f;
  Dev dl = Dev::from(logits);
  int32_t tok = -1;
  LS_ASSERT_OK(k_->sample({dl.f(), n, 0.0f, 0, 1.0f, 1, &tok}, s_));
  LS_ASSERT_OK(s_.synchronize());
  EXPECT_EQ(tok, a);
  for (uint64_t seed = rng_(), i = 0; i < 20; ++i) {
    LS_ASSERT_OK(k_->sample({dl.f(), n, 0.9f, 40, 0.9f, seed + i, &tok}, s_));
    LS_ASSERT_OK(s_.synchronize());
    auto cpu = make_kernels(BackendKind::kHost);
    ASSERT_TRUE(cpu.ok());
    InlineStream hs;
    int32_t want = -2;
    LS_ASSERT_OK((*cpu)->sample({logits.data(), n, 0.9f, 40, 0.9f, seed + i, &want}, hs));
    EXPECT_EQ(tok, want);
  }
}


// Defect 6 of issue 20: Q8_0/Q4_0/Q4_1 decode batches take the coalesced
// quarter-block kernel when x is 16-byte aligned (covered by the test above)
// and the lane-per-block kernel otherwise: both against the same reference.
TEST_F(CudaKernelsTest, MatvecAlignedAndUnalignedActivationsAgree) {
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1}) {
    for (int64_t n_in : {32, 96, 288, 1024}) {
      const int64_t n_out = 37, n_tok = 5;
      const Weight w = random_weight(type, n_out, n_in, rng_);
      std::vector<float> x = random_floats(n_in * n_tok + 1, rng_);
      for (int shift : {0, 1}) {
        const std::vector<float> xs(x.begin() + shift, x.begin() + shift + n_in * n_tok);
        std::vector<double> ref, abs_sum;
        ref_matmul(w, to_double(xs), n_tok, ref, &abs_sum);
        Dev dw = Dev::from(w.bytes), dx = Dev::from(x), dy = Dev::from(poisoned(n_out * n_tok));
        MatmulParams p{dw.p, type, n_out, n_in, dx.f() + shift, n_tok, dy.f(), nullptr, 0};
        LS_ASSERT_OK(k_->matmul(p, s_));
        LS_ASSERT_OK(s_.synchronize());
        const std::vector<float> y = dy.get<float>();
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_LE(std::fabs(y[i] - ref[i]), 4e-5 * abs_sum[i])
              << ggml_type_traits(type).name << " n_in " << n_in << " shift " << shift << " i " << i;
        }
      }
    }
  }
}

// Defect 1 of issue 20: the >8-token path rounded x to FP16, so |x| >= 65520
// became inf and the GEMM returned inf/NaN while the CPU kept f32. Rows here
// reach 1e6, and one row mixes 7e4 with 1e-3 values.
TEST_F(CudaKernelsTest, MatmulPrefillKeepsLargeActivationsFinite) {
  const int64_t n_out = 48, n_in = 256, n_tok = 12;
  for (GgmlType type : all_weight_types()) {
    const Weight w = random_weight(type, n_out, n_in, rng_);
    std::vector<float> x = random_floats(n_in * n_tok, rng_);
    for (int64_t t = 0; t < n_tok; ++t) {
      const float amp = t % 3 == 0 ? 1e6f : t % 3 == 1 ? 65520.0f : 1e-3f;
      for (int64_t i = 0; i < n_in; ++i) x[t * n_in + i] *= amp;
    }
    x[2 * n_in + 7] = 7e4f;  // a 1e-3 row with one huge element
    std::vector<double> ref, abs_sum;
    ref_matmul(w, to_double(x), n_tok, ref, &abs_sum);
    const uint64_t need = k_->matmul_scratch_bytes(type, n_out, n_in, n_tok);
    Dev dw = Dev::from(w.bytes), dx = Dev::from(x), dy = Dev::from(poisoned(n_out * n_tok));
    Dev scratch = Dev::from(std::vector<uint8_t>(need));
    MatmulParams p{dw.p, type, n_out, n_in, dx.f(), n_tok, dy.f(), scratch.p, need};
    LS_ASSERT_OK(k_->matmul(p, s_));
    LS_ASSERT_OK(s_.synchronize());
    const std::vector<float> y = dy.get<float>();
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << ggml_type_traits(type).name << " i " << i;
      ASSERT_LE(std::fabs(y[i] - ref[i]), gemm_tol(type, n_tok) * abs_sum[i]) << ggml_type_traits(type).name << " i " << i;
    }
  }
}

// Defect 4 of issue 20: a thread whose first element was NaN kept it (NaN
// compares false), and the tree reduction then dropped the subtree merged
// into it. Thread 0 starts on a NaN here and the maximum lies in the subtree
// of thread 512, which is merged into thread 0.
TEST_F(CudaKernelsTest, ArgmaxSkipsNaNAndKeepsTheMergedSubtree) {
  const int64_t n = 50000;
  std::vector<float> logits = random_floats(n, rng_, -5, 5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  logits[0] = nan;
  for (int i = 0; i < 50; ++i) logits[rng_() % n] = nan;
  const int64_t best = 512 + 1024 * 3;
  logits[best] = 9.0f;
  auto cpu = make_kernels(BackendKind::kHost);
  ASSERT_TRUE(cpu.ok());
  InlineStream hs;
  for (int round = 0; round < 2; ++round) {
    Dev dl = Dev::from(logits);
    int32_t tok = -1, want = -2;
    LS_ASSERT_OK(k_->sample({dl.f(), n, 0.0f, 0, 1.0f, 1, &tok}, s_));
    LS_ASSERT_OK(s_.synchronize());
    LS_ASSERT_OK((*cpu)->sample({logits.data(), n, 0.0f, 0, 1.0f, 1, &want}, hs));
    EXPECT_EQ(tok, round == 0 ? best : 0);
    EXPECT_EQ(tok, want) << "the CUDA and CPU greedy samplers disagree";
    std::fill(logits.begin(), logits.end(), nan);  // round 1: every logit NaN -> token 0
  }
}

// Defect 5 of issue 20: attention's grid y was n_tokens, so a prefill of more
// than 65535 tokens failed to launch. Checks tokens on both sides of the limit
// against a float64 reference of those tokens alone.
TEST_F(CudaKernelsTest, AttentionMoreThan65535Tokens) {
  const int64_t n_tok = 65535 + 101, n_head = 2, n_kv = 1, d = 32, row = n_kv * d;
  const std::vector<float> q = random_floats(n_tok * n_head * d, rng_, -2, 2);
  const std::vector<float> k = random_floats(n_tok * row, rng_), v = random_floats(n_tok * row, rng_, -2, 2);
  Dev dq = Dev::from(q), dk = Dev::from(k), dv = Dev::from(v), dkc = Dev::from(poisoned(n_tok * row)),
      dvc = Dev::from(poisoned(n_tok * row)), dout = Dev::from(poisoned(q.size()));
  AttentionParams p;
  p.q = dq.f();
  p.k_new = dk.f();
  p.v_new = dv.f();
  p.k_cache = dkc.p;
  p.v_cache = dvc.p;
  p.kv_type = GgmlType::F32;
  p.n_ctx = n_tok;
  p.start_pos = 0;
  p.n_tokens = n_tok;
  p.n_head = n_head;
  p.n_kv_head = n_kv;
  p.head_dim = d;
  p.out = dout.f();
  LS_ASSERT_OK(k_->attention(p, s_));
  LS_ASSERT_OK(s_.synchronize());
  const std::vector<float> out = dout.get<float>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t t : {int64_t{0}, int64_t{1}, int64_t{65534}, int64_t{65535}, int64_t{65536}, n_tok - 1}) {
    for (int64_t h = 0; h < n_head; ++h) {
      std::vector<double> s(t + 1), o(d, 0.0);
      double mx = -INFINITY, sum = 0;
      for (int64_t pos = 0; pos <= t; ++pos) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(q[(t * n_head + h) * d + i]) * k[pos * row + i];
        mx = std::max(mx, s[pos] = dot * scale);
      }
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int64_t pos = 0; pos <= t; ++pos) {
        for (int64_t i = 0; i < d; ++i) o[i] += s[pos] / sum * v[pos * row + i];
      }
      for (int64_t i = 0; i < d; ++i) {
        // f32 running sums over up to 65636 positions: ~sqrt(n) roundings of |v| <= 2.
        ASSERT_LE(std::fabs(out[(t * n_head + h) * d + i] - o[i]), 1e-3) << "token " << t << " head " << h;
      }
    }
  }
}

// The mixture-of-experts FFN on the device (router logits to the host,
// routing there, tokens gathered per expert, the matmul kernels on each
// expert's slice) against the CPU's exact path on the same inputs: the same
// experts, outputs within 1e-4 x (1 + max |cpu|).
// Plain (SwiGLU) and gpt-oss (biases on the router and every expert matrix,
// the clamped gate, MXFP4 experts).
TEST_F(CudaKernelsTest, MoeFfnMatchesTheCpuExactPath) {
  const int64_t n_embd = 64, n_ff = 96, n_expert = 6, n_used = 2;
  for (auto [type, gpt_oss] : {std::pair{GgmlType::F32, false}, {GgmlType::Q8_0, false}, {GgmlType::Q4_0, false},
                               {GgmlType::Q8_0, true}, {GgmlType::MXFP4, true}}) {
    for (int64_t n_tokens : {1, 9}) {
      const Weight router = random_weight(GgmlType::F32, n_expert, n_embd, rng_);
      std::vector<uint8_t> gate, up, down;
      for (int64_t e = 0; e < n_expert; ++e) {
        for (auto [bytes, rows, cols] : {std::tuple{&gate, n_ff, n_embd}, {&up, n_ff, n_embd}, {&down, n_embd, n_ff}}) {
          const Weight w = random_weight(type, rows, cols, rng_, 0.3f);
          bytes->insert(bytes->end(), w.bytes.begin(), w.bytes.end());
        }
      }
      const std::vector<float> x = random_floats(n_tokens * n_embd, rng_, gpt_oss ? -8 : -1, gpt_oss ? 8 : 1);
      const std::vector<float> rb = random_floats(n_expert, rng_), gb = random_floats(n_expert * n_ff, rng_),
                               ub = random_floats(n_expert * n_ff, rng_), db = random_floats(n_expert * n_embd, rng_);
      const uint64_t work_bytes = moe_work_bytes(n_tokens, n_embd, n_ff, n_expert, n_used);
      MoeFfnParams p{nullptr, n_tokens, n_embd, n_ff, n_expert, n_used};
      p.router_type = GgmlType::F32;
      p.gate_type = p.up_type = p.down_type = type;
      p.work_bytes = work_bytes;
      // The CPU's exact path on host copies.
      std::vector<float> want(n_tokens * n_embd);
      std::vector<uint8_t> host_work(work_bytes);
      MoeFfnParams hp = p;
      hp.x = x.data();
      hp.router = router.bytes.data();
      hp.gate = gate.data();
      hp.up = up.data();
      hp.down = down.data();
      hp.out = want.data();
      hp.work = host_work.data();
      if (gpt_oss) set_gpt_oss_ffn(hp, rb.data(), gb.data(), ub.data(), db.data());
      cpu::moe_ffn(hp, nullptr, /*exact=*/true);
      // The device.
      Dev dx = Dev::from(x), dr = Dev::from(router.bytes), dg = Dev::from(gate), du = Dev::from(up),
          dd = Dev::from(down), dout = Dev::from(poisoned(n_tokens * n_embd)),
          dwork = Dev::from(std::vector<uint8_t>(work_bytes));
      MoeFfnParams dp = p;
      dp.x = dx.f();
      dp.router = dr.p;
      dp.gate = dg.p;
      dp.up = du.p;
      dp.down = dd.p;
      dp.out = dout.f();
      dp.work = dwork.p;
      Dev drb = Dev::from(rb), dgb = Dev::from(gb), dub = Dev::from(ub), ddb = Dev::from(db);
      if (gpt_oss) set_gpt_oss_ffn(dp, drb.f(), dgb.f(), dub.f(), ddb.f());
      LS_ASSERT_OK(k_->moe_ffn(dp, s_));
      LS_ASSERT_OK(s_.synchronize());
      const std::vector<float> got = dout.get<float>();
      float amax = 0, diff = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        amax = std::max(amax, std::fabs(want[i]));
        diff = std::max(diff, std::fabs(got[i] - want[i]));
      }
      EXPECT_GT(amax, 1e-3f);
      EXPECT_LE(diff, 1e-4f * (1 + amax)) << ggml_type_traits(type).name << (gpt_oss ? " gpt-oss" : "") << ", "
                                          << n_tokens << " tokens";
    }
  }
}

}  // namespace
}  // namespace layerstream::kernels

#else  // built without CUDA: one test that reports the skip and why.

TEST(CudaKernelsTest, SkippedWithoutCuda) {
  LS_REQUIRE_CUDA_DEVICE();
  FAIL() << "cuda_device_available() is OK in a build without the CUDA backend";
}

#endif

// LlamaRunner on the host backend: (1) streaming never changes results —
// logits are bit-identical whatever the placement (all resident, most layers
// streamed from disk, RAM tier) for several dtypes and budgets; (2) the
// runner matches a float64 forward pass written here, from the GGUF spec,
// for a small random GQA model, over a prefill and several decode steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/model/example_model.h"
#include "runtime/model/gguf_file.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

using llama::LlamaRunner;
using llama::RunnerOptions;
using llama::Strategy;
using testing::open_host_device;
using testing::TempDir;
using testing::tiny_llama_spec;

RunnerOptions base_options() {
  RunnerOptions o;
  o.n_ctx = 64;
  o.link_gbps = 20;
  o.disk_gbps = 5;
  o.trace = false;
  return o;
}

// Prefill `prompt`, then decode `steps` given tokens; returns every logits row.
std::vector<std::vector<float>> run_tokens(LlamaRunner& r, const std::vector<int32_t>& prompt,
                                           const std::vector<int32_t>& next) {
  std::vector<std::vector<float>> out;
  Status st = r.prefill(0, prompt);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto l = r.logits(0);
  out.emplace_back(l.begin(), l.end());
  for (int32_t t : next) {
    const int seq = 0;
    st = r.decode(std::span<const int>(&seq, 1), std::span<const int32_t>(&t, 1));
    EXPECT_TRUE(st.ok()) << st.ToString();
    l = r.logits(0);
    out.emplace_back(l.begin(), l.end());
  }
  return out;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int n, int vocab) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

class StreamingIdentity : public ::testing::TestWithParam<GgmlType> {};

TEST_P(StreamingIdentity, LogitsBitIdenticalAcrossPlacements) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  ASSERT_TRUE(write_example_model(path, tiny_llama_spec(GetParam(), seed, /*n_ctx=*/256)).ok());
  auto dev = open_host_device(2);
  const auto prompt = random_tokens(rng, 9, 512);
  const auto next = random_tokens(rng, 4, 512);

  // The prefill chunk changes the matmul batch (and so the summation order
  // of quantised kernels): compare placements at the same chunk size.
  for (int chunk : {256, 4}) {
    SCOPED_TRACE("prefill chunk " + std::to_string(chunk));
    RunnerOptions ro = base_options();
    ro.strategy = Strategy::kResident;
    ro.prefill_chunk = chunk;
    LS_ASSERT_OK_AND_ASSIGN(auto resident, LlamaRunner::create(*dev, path, ro));
    ASSERT_EQ(resident->plan().count(sched::Tier::kResident), 6);
    const auto want = run_tokens(*resident, prompt, next);
    uint64_t largest = 0;
    for (uint64_t b : resident->executor().layer_bytes()) largest = std::max(largest, b);
    const uint64_t reserve = resident->reserve().total();
    resident.reset();

    struct Case {
      const char* name;
      Strategy strategy;
      uint64_t vram, ram;
    };
    const uint64_t slot = sched::round_up(largest, 4096) + 8192;
    const std::vector<Case> cases = {
        {"disk, 2 slots", Strategy::kPlanned, reserve + 2 * slot, 0},
        {"disk, serial", Strategy::kSerial, reserve + slot, 0},
        {"disk, 3 slots", Strategy::kPlanned, reserve + 3 * slot, 0},
        {"ram tier, overlap", Strategy::kOverlap, reserve + 2 * slot, 64ull << 20},
        {"mixed", Strategy::kPlanned, reserve + 4 * slot, 2 * slot + (8ull << 20)},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      RunnerOptions o = base_options();
      o.strategy = c.strategy;
      o.vram_budget = c.vram;
      o.ram_budget = c.ram;
      o.prefill_chunk = chunk;
      LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, o));
      EXPECT_GT(r->streamed_bytes_per_pass(), 0u) << "case streams nothing";
      EXPECT_LE(r->plan().count(sched::Tier::kResident), 4);
      const auto got = run_tokens(*r, prompt, next);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].size(), want[i].size());
        EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)))
            << "logits row " << i << " differ (seed " << seed << ")";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StreamingIdentity,
                         ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0),
                         [](const auto& info) { return ggml_type_name(static_cast<uint32_t>(info.param)); });

// ---- float64 reference -------------------------------------------------

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(man, -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

// Decodes a tensor per the GGUF spec: F32, F16, Q8_0 (f16 d + 32 int8).
std::vector<double> decode_tensor(const std::vector<uint8_t>& file, const GgufTensorInfo& t) {
  const uint8_t* p = file.data() + t.offset;
  const uint64_t n = t.n_elements();
  std::vector<double> out(n);
  auto u16 = [](const uint8_t* b) { return static_cast<uint16_t>(b[0] | (b[1] << 8)); };
  switch (t.type) {
    case GgmlType::F32:
      for (uint64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        out[i] = f;
      }
      break;
    case GgmlType::F16:
      for (uint64_t i = 0; i < n; ++i) out[i] = half_to_double(u16(p + 2 * i));
      break;
    case GgmlType::Q8_0:
      for (uint64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = p + 34 * b;
        const double d = half_to_double(u16(blk));
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = d * static_cast<int8_t>(blk[2 + j]);
      }
      break;
    default:
      ADD_FAILURE() << "reference cannot decode " << ggml_type_name(uint32_t(t.type));
  }
  return out;
}

struct RefModel {
  LlamaHparams h;
  std::vector<double> embd, out_norm, out;
  struct Block {
    std::vector<double> an, wq, wk, wv, wo, fn, wg, wu, wd;
  };
  std::vector<Block> blocks;
};

// y[o] = sum_i w[o * n_in + i] x[i]
std::vector<double> mv(const std::vector<double>& w, const std::vector<double>& x, size_t n_out) {
  const size_t n_in = x.size();
  std::vector<double> y(n_out, 0);
  for (size_t o = 0; o < n_out; ++o)
    for (size_t i = 0; i < n_in; ++i) y[o] += w[o * n_in + i] * x[i];
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// Llama RoPE: adjacent pairs (2i, 2i+1) of each head.
void rope(std::vector<double>& x, int n_heads, int hd, int n_rot, int pos, double base) {
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < n_rot / 2; ++i) {
      const double th = pos * std::pow(base, -2.0 * i / n_rot);
      double& a = x[h * hd + 2 * i];
      double& b = x[h * hd + 2 * i + 1];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(th) - b0 * std::sin(th);
      b = a0 * std::sin(th) + b0 * std::cos(th);
    }
}

// Runs tokens one at a time (mathematically the same as a causal prefill).
class RefRunner {
 public:
  explicit RefRunner(const RefModel& m) : m_(m), kc_(m.h.n_layers), vc_(m.h.n_layers) {}
  std::vector<double> step(int32_t tok) {
    const LlamaHparams& h = m_.h;
    const int e = h.n_embd, hd = h.head_dim, nh = h.n_head, nkv = h.n_head_kv;
    std::vector<double> x(m_.embd.begin() + int64_t(tok) * e, m_.embd.begin() + int64_t(tok + 1) * e);
    for (uint32_t l = 0; l < h.n_layers; ++l) {
      const auto& B = m_.blocks[l];
      auto xb = rmsnorm(x, B.an, h.rms_eps);
      auto q = mv(B.wq, xb, nh * hd), k = mv(B.wk, xb, nkv * hd), v = mv(B.wv, xb, nkv * hd);
      rope(q, nh, hd, h.n_rot, pos_, h.rope_freq_base);
      rope(k, nkv, hd, h.n_rot, pos_, h.rope_freq_base);
      kc_[l].push_back(k);
      vc_[l].push_back(v);
      std::vector<double> att(nh * hd, 0);
      for (int qh = 0; qh < nh; ++qh) {
        const int kvh = qh / (nh / nkv);
        std::vector<double> s(pos_ + 1);
        double mx = -INFINITY;
        for (int p = 0; p <= pos_; ++p) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[qh * hd + i] * kc_[l][p][kvh * hd + i];
          s[p] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[p]);
        }
        double sum = 0;
        for (double& v2 : s) sum += (v2 = std::exp(v2 - mx));
        for (int p = 0; p <= pos_; ++p)
          for (int i = 0; i < hd; ++i) att[qh * hd + i] += s[p] / sum * vc_[l][p][kvh * hd + i];
      }
      auto o = mv(B.wo, att, e);
      for (int i = 0; i < e; ++i) x[i] += o[i];
      auto xf = rmsnorm(x, B.fn, h.rms_eps);
      auto g = mv(B.wg, xf, h.n_ff), u = mv(B.wu, xf, h.n_ff);
      for (uint32_t i = 0; i < h.n_ff; ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      auto d = mv(B.wd, g, e);
      for (int i = 0; i < e; ++i) x[i] += d[i];
    }
    ++pos_;
    return mv(m_.out, rmsnorm(x, m_.out_norm, h.rms_eps), h.n_vocab);
  }

 private:
  const RefModel& m_;
  int pos_ = 0;
  std::vector<std::vector<std::vector<double>>> kc_, vc_;
};

class ReferenceForward : public ::testing::TestWithParam<GgmlType> {};

TEST_P(ReferenceForward, PrefillAndDecodeMatchFloat64) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  ASSERT_TRUE(write_example_model(path, tiny_llama_spec(GetParam(), seed, /*n_ctx=*/256)).ok());

  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel lm, load_llama_model(f));
  ASSERT_EQ(lm.hparams.n_head_kv * 2, lm.hparams.n_head) << "test wants GQA";
  const std::vector<uint8_t> bytes = testing::read_file(path);
  RefModel m;
  m.h = lm.hparams;
  m.embd = decode_tensor(bytes, lm.token_embd);
  m.out_norm = decode_tensor(bytes, lm.output_norm);
  m.out = decode_tensor(bytes, lm.output);
  for (const LlamaBlock& b : lm.blocks)
    m.blocks.push_back({decode_tensor(bytes, b.attn_norm), decode_tensor(bytes, b.attn_q), decode_tensor(bytes, b.attn_k),
                        decode_tensor(bytes, b.attn_v), decode_tensor(bytes, b.attn_output),
                        decode_tensor(bytes, b.ffn_norm), decode_tensor(bytes, b.ffn_gate),
                        decode_tensor(bytes, b.ffn_up), decode_tensor(bytes, b.ffn_down)});

  auto dev = open_host_device(2);
  RunnerOptions o = base_options();
  o.vram_budget = 0;   // default
  o.prefill_chunk = 5;  // the 11-token prompt takes three passes
  o.exact = true;       // f32 activations: the tolerance below is for f32 rounding only
  LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, o));
  const auto prompt = random_tokens(rng, 11, 512);
  const auto next = random_tokens(rng, 5, 512);
  const auto got = run_tokens(*r, prompt, next);

  RefRunner ref(m);
  std::vector<std::vector<double>> want;
  for (size_t i = 0; i < prompt.size(); ++i) {
    auto l = ref.step(prompt[i]);
    if (i + 1 == prompt.size()) want.push_back(l);
  }
  for (int32_t t : next) want.push_back(ref.step(t));

  // Tolerance: float32 activations and accumulation against float64 on the
  // same decoded weights; |err| <= 2e-3 * (1 + max |logit|) per row.
  ASSERT_EQ(got.size(), want.size());
  for (size_t row = 0; row < got.size(); ++row) {
    double mx = 0, err = 0;
    for (size_t i = 0; i < want[row].size(); ++i) {
      mx = std::max(mx, std::abs(want[row][i]));
      err = std::max(err, std::abs(want[row][i] - got[row][i]));
    }
    EXPECT_GT(mx, 1e-3) << "degenerate logits";
    EXPECT_LE(err, 2e-3 * (1 + mx)) << "row " << row << " max |ref| " << mx << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ReferenceForward, ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::Q8_0),
                         [](const auto& info) { return ggml_type_name(static_cast<uint32_t>(info.param)); });

}  // namespace
}  // namespace layerstream

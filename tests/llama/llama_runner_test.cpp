// LlamaRunner on the host backend: (1) streaming never changes results —
// logits are bit-identical whatever the placement (all resident, most layers
// streamed from disk straight or through the staging buffers of a
// copies-only device, RAM tier, mixed) for several dtypes and budgets, with
// a separate and a tied output head; (2) the
// runner matches a float64 forward pass written here, from the GGUF spec,
// for a small random GQA model, over a prefill and several decode steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>

#include "runtime/device/device.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/llama/perplexity.h"
#include "runtime/model/example_model.h"
#include "runtime/model/gguf_file.h"
#include "tests/common/runner_logits.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"
#include "tests/common/tiny_runner.h"
#include "tests/kernels/kernel_test_util.h"

namespace layerstream {
namespace {

using llama::LlamaRunner;
using llama::PassToken;
using llama::RunnerOptions;
using llama::Strategy;
using testing::open_host_device;
using testing::random_tokens;
using testing::TempDir;
using testing::tiny_llama_spec;

RunnerOptions base_options() { return testing::tiny_runner_options(/*trace=*/false); }

std::unique_ptr<Device> open_copies_only_device(int threads) {
  return open_host_device(threads, /*sim_link_gbps=*/0, /*copies_only=*/true);
}

// Writes `spec` (with a separate and with a tied output head) and checks that
// every placement, on a host-addressable device and on one only copies reach
// (the staged disk path a GPU takes), gives the resident logits bit for bit.
void expect_streaming_identity(ExampleModelSpec spec, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TempDir dir;
  auto dev = open_host_device(2);
  auto staged = open_copies_only_device(2);
  ASSERT_TRUE(dev && staged);
  ASSERT_FALSE(staged->info().host_addressable);
  const auto prompt = random_tokens(rng, 9, 512);
  const auto next = random_tokens(rng, 4, 512);

  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied output head" : "separate output head");
    const std::string path = dir.file(tied ? "tied.gguf" : "m.gguf");
    spec.tied_output = tied;
    LS_ASSERT_OK(testing::write_scratch_model(path, spec));
    // The prefill chunk changes the matmul batch (and so the summation order
    // of quantised kernels): compare placements at the same chunk size.
    for (int chunk : {256, 4}) {
      SCOPED_TRACE("prefill chunk " + std::to_string(chunk));
      RunnerOptions ro = base_options();
      ro.strategy = Strategy::kResident;
      ro.prefill_chunk = chunk;
      LS_ASSERT_OK_AND_ASSIGN(auto resident, LlamaRunner::create(*dev, path, ro));
      // Blocks and the head; the embedding is gathered, never a layer.
      ASSERT_EQ(resident->executor().layer_bytes().size(), spec.n_layers + 1u);
      ASSERT_EQ(resident->plan().count(sched::Tier::kResident), static_cast<int>(spec.n_layers + 1));
      const auto want = testing::runner_logits(*resident, prompt, next);
      uint64_t largest = 0, all = 0;
      for (uint64_t b : resident->executor().layer_bytes()) {
        largest = std::max(largest, b);
        all += b;
      }
      // Every byte of the model's layers is loaded once, however many
      // batch-class changes the prefill and decodes made.
      EXPECT_EQ(resident->executor().load_bytes(), all);
      const uint64_t reserve = resident->reserve().total() + 4096;
      resident.reset();

      struct Case {
        const char* name;
        Strategy strategy;
        uint64_t vram, ram;
        bool staged;
      };
      const uint64_t slot = sched::round_up(largest, 4096) + 8192;
      const std::vector<Case> cases = {
          {"disk, 2 slots", Strategy::kPlanned, reserve + 2 * slot, 0, false},
          {"disk, serial", Strategy::kSerial, reserve + slot, 0, false},
          {"disk, 3 slots", Strategy::kPlanned, reserve + 3 * slot, 0, false},
          {"disk staged, 2 slots", Strategy::kPlanned, reserve + 2 * slot, 0, true},
          {"disk staged, serial", Strategy::kSerial, reserve + slot, 0, true},
          {"ram tier, overlap", Strategy::kOverlap, reserve + 2 * slot, 64ull << 20, false},
          {"ram tier staged, overlap", Strategy::kOverlap, reserve + 2 * slot, 64ull << 20, true},
          {"mixed", Strategy::kPlanned, reserve + 3 * slot, 2 * slot + (8ull << 20), false},
          {"mixed staged", Strategy::kPlanned, reserve + 3 * slot, 2 * slot + (8ull << 20), true},
      };
      for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        RunnerOptions o = base_options();
        o.strategy = c.strategy;
        o.vram_budget = c.vram;
        o.ram_budget = c.ram;
        o.prefill_chunk = chunk;
        LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(c.staged ? *staged : *dev, path, o));
        EXPECT_GT(r->streamed_bytes_per_pass(), 0u) << "case streams nothing";
        EXPECT_LE(r->plan().count(sched::Tier::kResident), static_cast<int>(spec.n_layers));
        testing::expect_same_logits(testing::runner_logits(*r, prompt, next), want, "seed " + std::to_string(seed));
      }
    }
  }
}

class StreamingIdentity : public ::testing::TestWithParam<GgmlType> {};

TEST_P(StreamingIdentity, LogitsBitIdenticalAcrossPlacements) {
  const uint64_t seed = testing::fresh_seed();
  expect_streaming_identity(tiny_llama_spec(GetParam(), seed, /*n_ctx=*/256), seed);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StreamingIdentity,
                         ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                                           GgmlType::Q4_0, GgmlType::Q4_1),
                         [](const auto& info) { return ggml_type_name(static_cast<uint32_t>(info.param)); });

// RunnerOptions::external_weights (the uvm bench strategy's hook, tested on
// the host where device memory is host memory): every tensor is read at
// base + its file offset from a copy of the whole file, the executor holds
// only placeholders, before_layer sees each layer once per pass in order,
// and the logits equal the resident run's bit for bit (separate and tied head).
TEST(ExternalWeights, ReadInPlaceEqualsResidentBitForBit) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  TempDir dir;
  auto dev = open_host_device(2);
  ASSERT_TRUE(dev);
  const auto prompt = random_tokens(rng, 9, 512);
  const auto next = random_tokens(rng, 3, 512);
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied output head" : "separate output head");
    ExampleModelSpec spec = tiny_llama_spec(GgmlType::Q8_0, seed, /*n_ctx=*/256);
    spec.tied_output = tied;
    const std::string path = dir.file(tied ? "tied.gguf" : "m.gguf");
    LS_ASSERT_OK(testing::write_scratch_model(path, spec));
    RunnerOptions ro = base_options();
    ro.strategy = Strategy::kResident;
    ro.prefill_chunk = 4;
    LS_ASSERT_OK_AND_ASSIGN(auto resident, LlamaRunner::create(*dev, path, ro));
    const auto want = testing::runner_logits(*resident, prompt, next);
    const uint64_t weights = [&] {
      uint64_t all = 0;
      for (uint64_t b : resident->executor().layer_bytes()) all += b;
      return all;
    }();
    resident.reset();

    std::ifstream f(path, std::ios::binary);
    std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_GT(file.size(), weights);
    std::vector<int> seen;
    RunnerOptions o = base_options();
    o.prefill_chunk = 4;
    o.external_weights = RunnerOptions::ExternalWeights{file.data(), [&seen](int layer, Stream&) {
                                                          seen.push_back(layer);
                                                          return Status::OK();
                                                        }};
    LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, o));
    const int n = static_cast<int>(spec.n_layers) + 1;  // blocks and the head
    ASSERT_EQ(r->executor().layer_bytes().size(), static_cast<size_t>(n));
    for (uint64_t b : r->executor().layer_bytes()) EXPECT_EQ(b, 4096u) << "not a placeholder";
    EXPECT_EQ(r->streamed_bytes_per_pass(), 0u);
    const auto got = testing::runner_logits(*r, prompt, next);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)))
          << "logits row " << i << " differ (seed " << seed << ")";
    const uint64_t passes = r->executor().passes_run();
    ASSERT_GT(passes, 0u);
    ASSERT_EQ(seen.size(), passes * n);
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int>(i % n)) << "call " << i;
    // The weights are read from `file` itself: changed bytes, changed logits.
    for (size_t i = file.size() - weights; i < file.size(); ++i) file[i] ^= 0x5a;
    LS_ASSERT_OK(r->reset(0));
    const std::vector<float> changed = testing::decode_last_logits(*r, prompt);
    ASSERT_EQ(changed.size(), want[0].size());
    EXPECT_NE(0, std::memcmp(changed.data(), want[0].data(), want[0].size() * sizeof(float)));
    // A failing hook fails the pass with its error.
    RunnerOptions bad = o;
    bad.external_weights->before_layer = [](int layer, Stream&) {
      return layer == 1 ? Status::IOError("prefetch refused") : Status::OK();
    };
    LS_ASSERT_OK_AND_ASSIGN(auto rb, LlamaRunner::create(*dev, path, bad));
    std::vector<PassToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({prompt[i], static_cast<int32_t>(i), 0, false});
    Status st = rb->decode_tokens(batch, nullptr);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.ToString().find("prefetch refused"), std::string::npos) << st.ToString();
  }
}

// ---- float64 reference -------------------------------------------------

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(man, -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

// Decodes a tensor per the GGUF spec: F32, F16, Q8_0 (f16 d + 32 int8); Q4_0,
// Q4_1, BF16 and the Q5/K-quant/IQ4 types through the tests' float64 spec
// decoders (tests/kernels/kernel_test_util.h, kquant_spec.h).
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
    default: {
      const uint64_t row = t.dims[0];
      const uint64_t row_bytes = ggml_row_bytes(ggml_type_traits(t.type), row);
      for (uint64_t i = 0; i < n; ++i) {
        out[i] = kernels::testing::spec_element(t.type, p + (i / row) * row_bytes, static_cast<int64_t>(i % row));
      }
      if (n && std::isnan(out[0])) ADD_FAILURE() << "reference cannot decode " << ggml_type_name(uint32_t(t.type));
    }
  }
  return out;
}

struct RefModel {
  LlamaHparams h;
  std::vector<double> embd, out_norm, out, rope_freqs;  // rope_freqs empty: none
  struct Block {
    std::vector<double> an, wq, wk, wv, wo, fn, wg, wu, wd;
    std::vector<double> qn, kn, post_attn, post_ffn;  // empty when the arch has none
    // Mixture of experts (wg/wu/wd empty): the router [n_expert][n_embd] and
    // the experts' matrices, expert e's at e x (n_ff_exp x n_embd).
    std::vector<double> router, ge, ue, de;
    // Biases (empty: none): Q, K, V, the attention output; gpt-oss's sinks
    // [n_head], router [n_expert] and per-expert gate/up [n_expert][n_ff_exp]
    // and down [n_expert][n_embd].
    std::vector<double> qb, kb, vb, ob, sinks, router_b, ge_b, ue_b, de_b;
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

// RMSNorm of each head_dim-wide head of x with the same weights (QK-norm).
void rmsnorm_heads(std::vector<double>& x, const std::vector<double>& w, double eps) {
  const size_t hd = w.size();
  for (size_t h = 0; h < x.size() / hd; ++h) {
    std::vector<double> head(x.begin() + h * hd, x.begin() + (h + 1) * hd);
    head = rmsnorm(head, w, eps);
    std::copy(head.begin(), head.end(), x.begin() + h * hd);
  }
}

// RoPE of each head: llama pairs (2i, 2i+1), neox pairs (i, i + n_rot/2);
// pair i's angle pos * base^(-2i/n_rot) / factor[i] (factors empty: 1).
void rope(std::vector<double>& x, int n_heads, int hd, int n_rot, int pos, double base, bool neox,
          const std::vector<double>& factors) {
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < n_rot / 2; ++i) {
      const double th = pos * std::pow(base, -2.0 * i / n_rot) / (factors.empty() ? 1.0 : factors[i]);
      double& a = x[h * hd + (neox ? i : 2 * i)];
      double& b = x[h * hd + (neox ? i + n_rot / 2 : 2 * i + 1)];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(th) - b0 * std::sin(th);
      b = a0 * std::sin(th) + b0 * std::cos(th);
    }
}

double gelu_tanh(double g) { return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))); }

// Runs tokens one at a time (mathematically the same as a causal prefill).
// Written from the architectures' definitions (llama, qwen3: QK-norm; gemma3:
// sqrt(n_embd) embedding scale, QK-norm, post-attention/FFN norms, GeGLU,
// sliding-window layers with their own RoPE base), not from the runner.
class RefRunner {
 public:
  explicit RefRunner(const RefModel& m) : m_(m), kc_(m.h.n_layers), vc_(m.h.n_layers) {}
  std::vector<double> step(int32_t tok) {
    const LlamaHparams& h = m_.h;
    const int e = h.n_embd, hd = h.head_dim, nh = h.n_head, nkv = h.n_head_kv;
    const bool gemma = h.arch == "gemma3", neox = h.arch != "llama";
    std::vector<double> x(m_.embd.begin() + int64_t(tok) * e, m_.embd.begin() + int64_t(tok + 1) * e);
    if (gemma) for (double& v : x) v *= std::sqrt(double(e));
    for (uint32_t l = 0; l < h.n_layers; ++l) {
      const auto& B = m_.blocks[l];
      // gemma3: every swa_pattern-th layer global, the others local (window,
      // base 10000); gpt-oss: even layers local, with the global base.
      const bool local = h.n_swa > 0 && !h.swa_layers.empty() && h.swa_layers[l];
      const double base = local && gemma ? 10000.0 : h.rope_freq_base;
      auto xb = rmsnorm(x, B.an, h.rms_eps);
      auto q = mv(B.wq, xb, nh * hd), k = mv(B.wk, xb, nkv * hd), v = mv(B.wv, xb, nkv * hd);
      add(q, B.qb);
      add(k, B.kb);
      add(v, B.vb);
      if (!B.qn.empty()) {
        rmsnorm_heads(q, B.qn, h.rms_eps);
        rmsnorm_heads(k, B.kn, h.rms_eps);
      }
      rope(q, nh, hd, h.n_rot, pos_, base, neox, m_.rope_freqs);
      rope(k, nkv, hd, h.n_rot, pos_, base, neox, m_.rope_freqs);
      kc_[l].push_back(k);
      vc_[l].push_back(v);
      const int first = local && pos_ >= int(h.n_swa) ? pos_ - int(h.n_swa) + 1 : 0;
      std::vector<double> att(nh * hd, 0);
      for (int qh = 0; qh < nh; ++qh) {
        const int kvh = qh / (nh / nkv);
        std::vector<double> s(pos_ + 1, 0.0);
        double mx = -INFINITY;
        for (int p = first; p <= pos_; ++p) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[qh * hd + i] * kc_[l][p][kvh * hd + i];
          s[p] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[p]);
        }
        if (!B.sinks.empty()) mx = std::max(mx, B.sinks[qh]);  // gpt-oss: a logit in the denominator only
        double sum = B.sinks.empty() ? 0.0 : std::exp(B.sinks[qh] - mx);
        for (int p = first; p <= pos_; ++p) sum += (s[p] = std::exp(s[p] - mx));
        for (int p = first; p <= pos_; ++p)
          for (int i = 0; i < hd; ++i) att[qh * hd + i] += s[p] / sum * vc_[l][p][kvh * hd + i];
      }
      auto o = mv(B.wo, att, e);
      add(o, B.ob);
      if (!B.post_attn.empty()) o = rmsnorm(o, B.post_attn, h.rms_eps);
      for (int i = 0; i < e; ++i) x[i] += o[i];
      auto xf = rmsnorm(x, B.fn, h.rms_eps);
      std::vector<double> d =
          B.router.empty() ? dense_ffn(B.wg, B.wu, B.wd, xf, h.n_ff, gemma ? Act::kGelu : Act::kSilu) : experts(B, xf);
      if (!B.post_ffn.empty()) d = rmsnorm(d, B.post_ffn, h.rms_eps);
      for (int i = 0; i < e; ++i) x[i] += d[i];
    }
    ++pos_;
    return mv(m_.out, rmsnorm(x, m_.out_norm, h.rms_eps), h.n_vocab);
  }

 private:
  enum class Act { kSilu, kGelu, kSwigluOai };

  // y += b (b empty: no bias).
  static void add(std::vector<double>& y, const std::vector<double>& b) {
    for (size_t i = 0; i < b.size(); ++i) y[i] += b[i];
  }

  // gpt-oss's gate: x sigmoid(1.702 x) (y + 1), the gate clamped above at 7, the up projection to [-7, 7].
  static double swiglu_oai(double g, double u) {
    const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
    return x / (1 + std::exp(-1.702 * x)) * (y + 1);
  }

  // down(act(gate . x + gb, up . x + ub)) + db (empty biases: none).
  static std::vector<double> dense_ffn(const std::vector<double>& wg, const std::vector<double>& wu,
                                       const std::vector<double>& wd, const std::vector<double>& x, size_t n_ff,
                                       Act act, const std::vector<double>& gb = {}, const std::vector<double>& ub = {},
                                       const std::vector<double>& db = {}) {
    auto g = mv(wg, x, n_ff), u = mv(wu, x, n_ff);
    add(g, gb);
    add(u, ub);
    for (size_t i = 0; i < n_ff; ++i) {
      g[i] = act == Act::kSwigluOai ? swiglu_oai(g[i], u[i])
                                    : (act == Act::kGelu ? gelu_tanh(g[i]) : g[i] / (1 + std::exp(-g[i]))) * u[i];
    }
    auto y = mv(wd, g, x.size());
    add(y, db);
    return y;
  }

  // qwen3moe / Mixtral: softmax over the router's logits, the n_expert_used
  // most probable experts, their probabilities renormalised to sum to 1,
  // the weighted sum of those experts' SwiGLU FFNs. gpt-oss: the router's
  // logits plus its bias, the same weights (a softmax over the chosen
  // logits), experts with biases and the clamped gate.
  std::vector<double> experts(const RefModel::Block& B, const std::vector<double>& x) const {
    const LlamaHparams& h = m_.h;
    const size_t E = h.n_expert, ff = h.n_ff_exp, e = x.size(), slice = ff * e;
    std::vector<double> logits = mv(B.router, x, E);
    add(logits, B.router_b);
    const double mx = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(E);
    double z = 0;
    for (size_t i = 0; i < E; ++i) z += p[i] = std::exp(logits[i] - mx);
    for (double& v : p) v /= z;
    std::vector<size_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    double chosen = 0;
    for (size_t k = 0; k < h.n_expert_used; ++k) chosen += p[order[k]];
    std::vector<double> out(e, 0);
    for (size_t k = 0; k < h.n_expert_used; ++k) {
      const size_t ex = order[k];
      auto part = [&](const std::vector<double>& w) {
        return std::vector<double>(w.begin() + ex * slice, w.begin() + (ex + 1) * slice);
      };
      auto row = [&](const std::vector<double>& b, size_t width) {
        return b.empty() ? b : std::vector<double>(b.begin() + ex * width, b.begin() + (ex + 1) * width);
      };
      const bool oai = !B.router_b.empty();
      const std::vector<double> y = dense_ffn(part(B.ge), part(B.ue), part(B.de), x, ff, oai ? Act::kSwigluOai : Act::kSilu,
                                              row(B.ge_b, ff), row(B.ue_b, ff), row(B.de_b, e));
      for (size_t i = 0; i < e; ++i) out[i] += p[ex] / chosen * y[i];
    }
    return out;
  }

  const RefModel& m_;
  int pos_ = 0;
  std::vector<std::vector<std::vector<double>>> kc_, vc_;
};

RefModel load_reference(const std::string& path, const LlamaModel& lm) {
  const std::vector<uint8_t> bytes = testing::read_file(path);
  auto opt = [&](const std::optional<GgufTensorInfo>& t) {
    return t ? decode_tensor(bytes, *t) : std::vector<double>();
  };
  RefModel m;
  m.h = lm.hparams;
  m.embd = decode_tensor(bytes, lm.token_embd);
  m.out_norm = decode_tensor(bytes, lm.output_norm);
  m.out = decode_tensor(bytes, lm.output);
  m.rope_freqs = opt(lm.rope_freqs);
  auto dense = [&](const LlamaBlock& b, const GgufTensorInfo& t) {
    return b.moe ? std::vector<double>() : decode_tensor(bytes, t);
  };
  auto moe = [&](const LlamaBlock& b, const GgufTensorInfo MoeTensors::*t) {
    return b.moe ? decode_tensor(bytes, (*b.moe).*t) : std::vector<double>();
  };
  auto moe_bias = [&](const LlamaBlock& b, const std::optional<GgufTensorInfo> MoeTensors::*t) {
    return b.moe ? opt((*b.moe).*t) : std::vector<double>();
  };
  for (const LlamaBlock& b : lm.blocks) {
    m.blocks.push_back({decode_tensor(bytes, b.attn_norm), decode_tensor(bytes, b.attn_q), decode_tensor(bytes, b.attn_k),
                        decode_tensor(bytes, b.attn_v), decode_tensor(bytes, b.attn_output),
                        decode_tensor(bytes, b.ffn_norm), dense(b, b.ffn_gate), dense(b, b.ffn_up),
                        dense(b, b.ffn_down), opt(b.attn_q_norm), opt(b.attn_k_norm), opt(b.attn_post_norm),
                        opt(b.ffn_post_norm), moe(b, &MoeTensors::router), moe(b, &MoeTensors::gate_exps),
                        moe(b, &MoeTensors::up_exps), moe(b, &MoeTensors::down_exps)});
    RefModel::Block& r = m.blocks.back();
    r.qb = opt(b.attn_q_bias);
    r.kb = opt(b.attn_k_bias);
    r.vb = opt(b.attn_v_bias);
    r.ob = opt(b.attn_output_bias);
    r.sinks = opt(b.attn_sinks);
    r.router_b = moe_bias(b, &MoeTensors::router_bias);
    r.ge_b = moe_bias(b, &MoeTensors::gate_bias);
    r.ue_b = moe_bias(b, &MoeTensors::up_bias);
    r.de_b = moe_bias(b, &MoeTensors::down_bias);
  }
  return m;
}

// Tolerance: float32 activations and accumulation against float64 on the
// same decoded weights; |err| <= 2e-3 * (1 + max |logit|) per row. `worst`
// (when given): the largest error relative to (1 + max |logit|) of its row.
void expect_logits_near(const std::vector<std::vector<float>>& got, const std::vector<std::vector<double>>& want,
                        uint64_t seed, double* worst = nullptr) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t row = 0; row < got.size(); ++row) {
    double mx = 0, err = 0;
    for (size_t i = 0; i < want[row].size(); ++i) {
      mx = std::max(mx, std::abs(want[row][i]));
      err = std::max(err, std::abs(want[row][i] - got[row][i]));
    }
    EXPECT_GT(mx, 1e-3) << "degenerate logits";
    EXPECT_LE(err, 2e-3 * (1 + mx)) << "row " << row << " max |ref| " << mx << " seed " << seed;
    if (worst) *worst = std::max(*worst, err / (1 + mx));
  }
}

// The logits of a runner on the model at `path` (exact path: f32
// activations, so the tolerance is for f32 rounding only; the 11-token prompt
// in passes of `prefill_chunk`) and of the float64 forward pass `m`, over a
// random prompt and 5 decode steps.
void logits_beside_reference(const std::string& path, const RefModel& m, std::mt19937_64& rng, int prefill_chunk,
                             std::vector<std::vector<float>>& got, std::vector<std::vector<double>>& want) {
  auto dev = open_host_device(2);
  ASSERT_TRUE(dev);
  RunnerOptions o = base_options();
  o.prefill_chunk = prefill_chunk;
  o.exact = true;
  LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, o));
  const auto prompt = random_tokens(rng, 11, 512);
  const auto next = random_tokens(rng, 5, 512);
  got = testing::runner_logits(*r, prompt, next);

  RefRunner ref(m);
  want.clear();
  for (size_t i = 0; i < prompt.size(); ++i) {
    auto l = ref.step(prompt[i]);
    if (i + 1 == prompt.size()) want.push_back(l);
  }
  for (int32_t t : next) want.push_back(ref.step(t));
}

// Runs a prefill and decode steps on the model at `path` and compares every
// logits row with the float64 forward pass of the file's decoded weights.
// `worst`: the largest error relative to (1 + max |logit|) of its row.
void compare_with_reference(const std::string& path, uint64_t seed, double& worst) {
  std::mt19937_64 rng(seed);
  worst = 0;
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel lm, load_llama_model(f));
  ASSERT_EQ(lm.hparams.n_head_kv * 2, lm.hparams.n_head) << "test wants GQA";
  const RefModel m = load_reference(path, lm);
  std::vector<std::vector<float>> got;
  std::vector<std::vector<double>> want;
  logits_beside_reference(path, m, rng, /*prefill_chunk=*/5, got, want);
  expect_logits_near(got, want, seed, &worst);
}

// Writes `spec` and compares it with the float64 forward pass.
void expect_matches_reference(const ExampleModelSpec& spec, uint64_t seed) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  LS_ASSERT_OK(testing::write_scratch_model(path, spec));
  double worst = 0;
  compare_with_reference(path, seed, worst);
}

class ReferenceForward : public ::testing::TestWithParam<GgmlType> {};

TEST_P(ReferenceForward, PrefillAndDecodeMatchFloat64) {
  const uint64_t seed = testing::fresh_seed();
  expect_matches_reference(tiny_llama_spec(GetParam(), seed, /*n_ctx=*/256), seed);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ReferenceForward, ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::Q8_0),
                         [](const auto& info) { return ggml_type_name(static_cast<uint32_t>(info.param)); });

// ---- other architectures -------------------------------------------------

struct ArchCase {
  const char* name;
  std::string arch;
  bool rope_freqs = false;
  uint32_t head_dim = 0, sliding_window = 0, swa_pattern = 6;
  GgmlType dtype = GgmlType::F32;
  uint32_t n_expert = 0, n_expert_used = 0;  // qwen3moe, mixtral
  ExampleMix mix = ExampleMix::kUniform;     // a mix: dtype is its base type, widths of 256
  std::optional<GgmlType> expert_dtype;       // the experts' own type (gpt-oss: MXFP4)
};

ExampleModelSpec arch_spec(const ArchCase& c, uint64_t seed) {
  ExampleModelSpec s = tiny_llama_spec(c.dtype, seed, /*n_ctx=*/256);
  s.arch = c.arch;
  s.rope_freqs = c.rope_freqs;
  s.head_dim = c.head_dim;
  s.sliding_window = c.sliding_window;
  s.swa_pattern = c.swa_pattern;
  s.n_expert = c.n_expert;
  s.n_expert_used = c.n_expert_used;
  s.mix = c.mix;
  s.expert_dtype = c.expert_dtype;
  if (c.mix != ExampleMix::kUniform) {  // rows the K types hold; 3 layers keep the K-quant encoding short
    s.n_embd = s.n_ff = 256;
    s.n_layers = 3;
  }
  return s;
}

const ArchCase kArchCases[] = {
    {"qwen3", "qwen3"},
    {"qwen3_q8_0", "qwen3", false, 0, 0, 6, GgmlType::Q8_0},
    {"llama31_rope_freqs", "llama", true},
    // Head width 32 != 64/4, window 5 over a 16-token run, layers 0 and 2 local.
    {"gemma3", "gemma3", false, 32, 5, 2},
    {"gemma3_q8_0", "gemma3", false, 32, 5, 2, GgmlType::Q8_0},
    {"gemma3_no_window", "gemma3", false, 0, 0, 6, GgmlType::F16},
    // Mixtures of experts: 8 experts, 2 per token (qwen3moe: QK-norm, neox
    // RoPE; mixtral: a llama file with expert keys).
    {"qwen3moe", "qwen3moe", false, 0, 0, 6, GgmlType::F32, 8, 2},
    {"qwen3moe_q8_0", "qwen3moe", false, 0, 0, 6, GgmlType::Q8_0, 8, 2},
    {"mixtral", "mixtral", false, 0, 0, 6, GgmlType::F32, 4, 2},
    {"mixtral_q8_0", "mixtral", false, 0, 0, 6, GgmlType::Q8_0, 4, 2},
    {"qwen3moe_q4_k_m", "qwen3moe", false, 0, 0, 6, GgmlType::Q4_K, 8, 2, ExampleMix::kQ4_K_M},
    {"mixtral_q4_k_m", "mixtral", false, 0, 0, 6, GgmlType::Q4_K, 8, 2, ExampleMix::kQ4_K_M},
    // gpt-oss: sinks, biases, the clamped gate, window 5 on the even layers;
    // experts in MXFP4 as it ships them.
    {"gpt_oss", "gpt-oss", false, 0, 5, 2, GgmlType::F32, 4, 2},
    {"gpt_oss_q8_0_mxfp4", "gpt-oss", false, 0, 5, 2, GgmlType::Q8_0, 4, 2, ExampleMix::kUniform, GgmlType::MXFP4},
};

// Each test starts from the case's model written at `path`, seeded `seed`.
class ArchReference : public ::testing::TestWithParam<ArchCase> {
 protected:
  void SetUp() override { LS_ASSERT_OK(write_example_model(path, arch_spec(GetParam(), seed))); }

  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng{seed};
  TempDir dir;
  const std::string path = dir.file("m.gguf");
};

TEST_P(ArchReference, PrefillAndDecodeMatchFloat64) {
  const ArchCase& c = GetParam();
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel lm, load_llama_model(f));
  EXPECT_EQ(lm.hparams.arch, c.arch == "mixtral" ? "llama" : c.arch);
  EXPECT_EQ(lm.hparams.n_expert, c.n_expert);
  EXPECT_EQ(lm.hparams.n_expert_used, c.n_expert_used);
  EXPECT_EQ(lm.rope_freqs.has_value(), c.rope_freqs);
  if (c.sliding_window) {
    ASSERT_EQ(lm.hparams.n_swa, c.sliding_window);
    EXPECT_TRUE(lm.hparams.is_swa(0));
    EXPECT_FALSE(lm.hparams.is_swa(1));
  }
  const RefModel m = load_reference(path, lm);
  std::vector<std::vector<float>> got;
  std::vector<std::vector<double>> want;
  logits_beside_reference(path, m, rng, /*prefill_chunk=*/4, got, want);
  expect_logits_near(got, want, seed);
}

// Streaming never changes results, for each architecture: most layers
// streamed from disk (and a RAM tier) give the resident logits bit for bit.
TEST_P(ArchReference, StreamedEqualsResidentBitForBit) {
  auto dev = open_host_device(2);
  const auto prompt = random_tokens(rng, 9, 512);
  const auto next = random_tokens(rng, 4, 512);
  RunnerOptions ro = base_options();
  ro.strategy = Strategy::kResident;
  ro.prefill_chunk = 4;
  LS_ASSERT_OK_AND_ASSIGN(auto resident, LlamaRunner::create(*dev, path, ro));
  const auto want = testing::runner_logits(*resident, prompt, next);
  uint64_t largest = 0;
  for (uint64_t b : resident->executor().layer_bytes()) largest = std::max(largest, b);
  const uint64_t reserve = resident->reserve().total(), slot = sched::round_up(largest, 4096) + 8192;
  resident.reset();
  for (uint64_t ram : {uint64_t{0}, uint64_t{64} << 20}) {
    RunnerOptions o = base_options();
    o.strategy = ram ? Strategy::kOverlap : Strategy::kPlanned;
    o.vram_budget = reserve + 2 * slot;
    o.ram_budget = ram;
    o.prefill_chunk = 4;
    LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, o));
    EXPECT_GT(r->streamed_bytes_per_pass(), 0u) << "case streams nothing";
    testing::expect_same_logits(testing::runner_logits(*r, prompt, next), want,
                                "ram " + std::to_string(ram) + ", seed " + std::to_string(seed));
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchReference, ::testing::ValuesIn(kArchCases),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- perplexity ------------------------------------------------------------

// llama-perplexity's quantity, from the float64 reference: windows of n_ctx
// tokens (first replaced by BOS), each from an empty cache, the tokens at
// n_ctx/2 + 1 .. n_ctx - 1 scored by the logits one position earlier.
double reference_perplexity(const RefModel& m, const std::vector<int32_t>& tokens, int n_ctx, int n_chunks,
                            int32_t bos) {
  double nll = 0;
  int64_t count = 0;
  for (int c = 0; c < n_chunks; ++c) {
    RefRunner ref(m);
    std::vector<int32_t> w(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    w[0] = bos;
    for (int p = 0; p + 1 < n_ctx; ++p) {
      const std::vector<double> l = ref.step(w[p]);
      if (p < n_ctx / 2) continue;
      double mx = -INFINITY, sum = 0;
      for (double v : l) mx = std::max(mx, v);
      for (double v : l) sum += std::exp(v - mx);
      nll += -(l[w[p + 1]] - mx - std::log(sum));
      ++count;
    }
  }
  return std::exp(nll / count);
}

TEST(Perplexity, MatchesFloat64ReferenceResidentAndStreamed) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  ArchCase c{"gemma3", "gemma3", false, 32, 5, 2};  // the most different architecture
  LS_ASSERT_OK(write_example_model(path, arch_spec(c, seed)));
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel lm, load_llama_model(f));
  const RefModel m = load_reference(path, lm);
  // 2.5 windows of 16: two are scored, the tail is ignored; 7 tokens per window.
  const int n_ctx = 16;
  const std::vector<int32_t> tokens = random_tokens(rng, 40, 512);
  const double want = reference_perplexity(m, tokens, n_ctx, 2, /*bos=*/1);

  auto dev = open_host_device(2);
  RunnerOptions ro = base_options();
  ro.logits_all = true;
  ro.n_ctx = n_ctx;
  ro.prefill_chunk = 6;  // windows in three passes, one straddling the scored half
  ro.strategy = Strategy::kResident;
  llama::PerplexityOptions po;
  po.n_ctx = n_ctx;
  po.bos = 1;
  std::vector<int> seen;
  LS_ASSERT_OK_AND_ASSIGN(auto r, LlamaRunner::create(*dev, path, ro));
  LS_ASSERT_OK_AND_ASSIGN(llama::PerplexityResult res,
                          llama::compute_perplexity(*r, tokens, po, [&](const llama::PerplexityChunk& ch, int n) {
                            seen.push_back(ch.index);
                            EXPECT_EQ(n, 2);
                            return true;
                          }));
  EXPECT_EQ(res.n_chunks, 2);
  EXPECT_EQ(res.scored, 2 * (n_ctx - 1 - n_ctx / 2));
  EXPECT_EQ(seen, (std::vector<int>{0, 1}));
  EXPECT_GT(want, 1.5) << "degenerate model";
  EXPECT_NEAR(res.ppl, want, 1e-4 * want) << "seed " << seed;
  EXPECT_DOUBLE_EQ(res.chunks.back().running_ppl, res.ppl);

  // Streamed from disk under a budget of two slots: the same figure, exactly.
  uint64_t largest = 0;
  for (uint64_t b : r->executor().layer_bytes()) largest = std::max(largest, b);
  const uint64_t reserve = r->reserve().total();
  r.reset();
  ro.strategy = Strategy::kPlanned;
  ro.vram_budget = reserve + 2 * (sched::round_up(largest, 4096) + 8192);
  LS_ASSERT_OK_AND_ASSIGN(auto streamed, LlamaRunner::create(*dev, path, ro));
  EXPECT_GT(streamed->streamed_bytes_per_pass(), 0u);
  LS_ASSERT_OK_AND_ASSIGN(llama::PerplexityResult sres, llama::compute_perplexity(*streamed, tokens, po));
  EXPECT_EQ(sres.ppl, res.ppl);

  // Too short a text, and a runner without logits_all, are clear errors.
  auto short_text = llama::compute_perplexity(*streamed, std::span(tokens).first(31), po);
  ASSERT_FALSE(short_text.ok());
  EXPECT_NE(short_text.status().message().find("needs at least 32"), std::string::npos) << short_text.status().ToString();
  ro.logits_all = false;
  LS_ASSERT_OK_AND_ASSIGN(auto plain, LlamaRunner::create(*dev, path, ro));
  EXPECT_TRUE(llama::compute_perplexity(*plain, tokens, po).status().IsInvalidArgument());
}

// The Q5, K-quant and IQ4 types and the llama.cpp-style mixes, on a model
// whose widths are multiples of 256 (so the K types are really used; the
// mixes also hold Q6_K/Q5_K/Q4_K tensors): the float64 forward pass and
// streamed == resident.
struct QuantCase {
  GgmlType dtype;
  ExampleMix mix;
};

class QuantisedModels : public ::testing::TestWithParam<QuantCase> {
 protected:
  static ExampleModelSpec spec(const QuantCase& c, uint64_t seed) {
    ExampleModelSpec s = tiny_llama_spec(c.dtype, seed, /*n_ctx=*/256);
    s.n_embd = 256;
    s.n_ff = 512;
    s.mix = c.mix;
    return s;
  }
};

TEST_P(QuantisedModels, PrefillAndDecodeMatchFloat64) {
  const uint64_t seed = testing::fresh_seed();
  expect_matches_reference(spec(GetParam(), seed), seed);
}

TEST_P(QuantisedModels, LogitsBitIdenticalAcrossPlacements) {
  const uint64_t seed = testing::fresh_seed();
  expect_streaming_identity(spec(GetParam(), seed), seed);
}

INSTANTIATE_TEST_SUITE_P(
    Types, QuantisedModels,
    ::testing::Values(QuantCase{GgmlType::Q5_0, ExampleMix::kUniform}, QuantCase{GgmlType::Q5_1, ExampleMix::kUniform},
                      QuantCase{GgmlType::Q2_K, ExampleMix::kUniform}, QuantCase{GgmlType::Q3_K, ExampleMix::kUniform},
                      QuantCase{GgmlType::Q4_K, ExampleMix::kUniform}, QuantCase{GgmlType::Q5_K, ExampleMix::kUniform},
                      QuantCase{GgmlType::Q6_K, ExampleMix::kUniform}, QuantCase{GgmlType::IQ4_NL, ExampleMix::kUniform},
                      QuantCase{GgmlType::IQ4_XS, ExampleMix::kUniform}, QuantCase{GgmlType::Q4_K, ExampleMix::kQ4_K_M},
                      QuantCase{GgmlType::Q5_K, ExampleMix::kQ5_K_M}, QuantCase{GgmlType::Q3_K, ExampleMix::kQ3_K_M}),
    [](const auto& info) {
      return info.param.mix != ExampleMix::kUniform ? std::string(example_mix_name(info.param.mix))
                                                     : ggml_type_name(static_cast<uint32_t>(info.param.dtype));
    });

}  // namespace
}  // namespace layerstream

namespace layerstream {
namespace {

// The non-empty entries of the ':'-separated list in environment variable
// `name` (bench/peer/interop.sh sets the interop lists); none when unset.
std::vector<std::string> env_list(const char* name) {
  std::vector<std::string> out;
  const char* list = std::getenv(name);
  const std::string text = list ? list : "";
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = std::min(text.find(':', begin), text.size());
    if (end > begin) out.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

// Interop (not CI; bench/peer/interop.sh): files made by llama.cpp's
// llama-quantize, listed in LAYERSTREAM_INTEROP_FILES (separated by ':'),
// load, run, and match the float64 forward pass of their decoded weights.
TEST(Interop, ExternalFilesMatchFloat64) {
  const std::vector<std::string> files = env_list("LAYERSTREAM_INTEROP_FILES");
  if (files.empty()) GTEST_SKIP() << "LAYERSTREAM_INTEROP_FILES not set (bench/peer/interop.sh sets it)";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    double worst = -1;
    compare_with_reference(path, testing::fresh_seed(), worst);
    std::printf("interop: %s: max |err| / (1 + max |logit|) = %.3g%s\n", path.c_str(), worst,
                ::testing::Test::HasFailure() ? " (FAILED)" : "");
  }
}

}  // namespace
}  // namespace layerstream

namespace layerstream {
namespace {

// Interop (not CI; bench/peer/interop.sh): files layerstream wrote (our
// encoder) and the F32 files llama.cpp's llama-quantize --allow-requantize
// made of them (ggml's decoder), as "OURS=F32" pairs in
// LAYERSTREAM_INTEROP_PAIRS (separated by ':'): every element ggml decoded
// equals our float64 spec decoding rounded once to f32.
TEST(Interop, LlamaCppDecodesOurFilesAsWeDo) {
  const std::vector<std::string> pairs = env_list("LAYERSTREAM_INTEROP_PAIRS");
  if (pairs.empty()) GTEST_SKIP() << "LAYERSTREAM_INTEROP_PAIRS not set (bench/peer/interop.sh sets it)";
  for (const std::string& pair : pairs) {
    const size_t eq = pair.find('=');
    ASSERT_NE(eq, std::string::npos) << pair;
    const std::string ours = pair.substr(0, eq), theirs = pair.substr(eq + 1);
    SCOPED_TRACE(ours);
    LS_ASSERT_OK_AND_ASSIGN(GgufFile fo, read_gguf_file(ours));
    LS_ASSERT_OK_AND_ASSIGN(GgufFile ft, read_gguf_file(theirs));
    const std::vector<uint8_t> bo = testing::read_file(ours), bt = testing::read_file(theirs);
    uint64_t checked = 0, mismatches = 0;
    for (const GgufTensorInfo& t : fo.tensors()) {
      const GgufTensorInfo* u = ft.find_tensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      ASSERT_EQ(u->type, GgmlType::F32) << t.name;
      const std::vector<double> want = decode_tensor(bo, t);
      for (uint64_t i = 0; i < want.size(); ++i) {
        float got;
        std::memcpy(&got, bt.data() + u->offset + 4 * i, 4);
        if (!kernels::testing::decoded_exactly(got, want[i])) ++mismatches;
        ++checked;
      }
    }
    EXPECT_EQ(mismatches, 0u);
    std::printf("interop pair: %s: %llu elements, %llu differ from ggml's decoding\n", ours.c_str(),
                static_cast<unsigned long long>(checked), static_cast<unsigned long long>(mismatches));
  }
}

}  // namespace
}  // namespace layerstream

// Helpers for the kernel tests: an inline Stream, random weights in every
// type with their exact float64 decoding (written from the GGUF spec, not
// through the library's decoders), and float64 reference ops.
#pragma once

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/math/convert_row.h"
#include "kernels/math/fp16.h"
#include "runtime/device/device.h"
#include "runtime/device/inline_stream.h"
#include "tests/kernels/kquant_spec.h"
#include "tests/common/testing.h"

namespace layerstream::kernels::testing {

using layerstream::InlineStream;

inline std::vector<GgmlType> all_weight_types() {
  std::vector<GgmlType> t = {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1};
  for (GgmlType k : kquant_types()) t.push_back(k);
  return t;
}
inline bool is_block_type(GgmlType t) { return ggml_type_traits(t).block_elems > 1; }

inline std::vector<float> random_floats(size_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<float> poisoned(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

// Spec decoders from raw little-endian bytes.
inline double spec_half(const uint8_t* p) {
  const uint16_t h = static_cast<uint16_t>(p[0] | (p[1] << 8));
  const int e = (h >> 10) & 31, m = h & 1023;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h >> 15) ? -mag : mag;
}
inline double spec_bf16(const uint8_t* p) {
  const uint32_t u = static_cast<uint32_t>(p[0] | (p[1] << 8)) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline double spec_element(GgmlType t, const uint8_t* row, int64_t i) {
  switch (t) {
    case GgmlType::F32: {
      float f;
      std::memcpy(&f, row + 4 * i, 4);
      return f;
    }
    case GgmlType::F16: return spec_half(row + 2 * i);
    case GgmlType::BF16: return spec_bf16(row + 2 * i);
    case GgmlType::Q8_0: {
      const uint8_t* b = row + (i / 32) * 34;
      return spec_half(b) * static_cast<int8_t>(b[2 + i % 32]);
    }
    case GgmlType::Q4_0: {
      const uint8_t* b = row + (i / 32) * 18;
      const int j = static_cast<int>(i % 32);
      const int q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
      return spec_half(b) * (q - 8);
    }
    case GgmlType::Q4_1: {
      const uint8_t* b = row + (i / 32) * 20;
      const int j = static_cast<int>(i % 32);
      const int q = j < 16 ? (b[4 + j] & 15) : (b[4 + j - 16] >> 4);
      return spec_half(b) * q + spec_half(b + 2);
    }
    default: {
      const GgmlTypeTraits tr = ggml_type_traits(t);
      return kspec_element(t, row + (i / tr.block_elems) * tr.block_bytes, static_cast<int>(i % tr.block_elems));
    }
  }
}

// Exact decoding: the f32 value is the exact (float64) value rounded once to
// f32, so it equals it when that is representable and is within half an f32
// ulp (2^-24 relative) otherwise (types with an offset: scale * q + offset).
inline bool decoded_exactly(float got, double exact) {
  if (static_cast<double>(static_cast<float>(exact)) == exact) return static_cast<double>(got) == exact;
  return std::fabs(got - exact) <= std::ldexp(std::fabs(exact), -24);
}

// A random weight [n_rows][n_cols] encoded in `type`, and its exact values.
struct Weight {
  GgmlType type;
  int64_t n_rows, n_cols;
  std::vector<uint8_t> bytes;
  std::vector<double> exact;  // [n_rows][n_cols]
};

inline Weight random_weight(GgmlType type, int64_t n_rows, int64_t n_cols, std::mt19937_64& rng, float amp = 1.0f) {
  Weight w{type, n_rows, n_cols, {}, {}};
  const uint64_t rb = ggml_row_bytes(ggml_type_traits(type), n_cols);
  w.bytes.resize(rb * n_rows);
  w.exact.resize(n_rows * n_cols);
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> f = random_floats(n_cols, rng, -amp, amp);
    if (!math::encode_row(type, f.data(), n_cols, w.bytes.data() + r * rb).ok()) std::abort();
    for (int64_t i = 0; i < n_cols; ++i) w.exact[r * n_cols + i] = spec_element(type, w.bytes.data() + r * rb, i);
  }
  return w;
}

// ---- float64 references ------------------------------------------------------
inline void ref_matmul(const Weight& w, const std::vector<double>& x, int64_t n_tok, std::vector<double>& y,
                       std::vector<double>* abs_sum = nullptr) {
  y.assign(n_tok * w.n_rows, 0.0);
  if (abs_sum) abs_sum->assign(n_tok * w.n_rows, 0.0);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t o = 0; o < w.n_rows; ++o) {
      double s = 0, a = 0;
      for (int64_t i = 0; i < w.n_cols; ++i) {
        s += w.exact[o * w.n_cols + i] * x[t * w.n_cols + i];
        a += std::fabs(w.exact[o * w.n_cols + i] * x[t * w.n_cols + i]);
      }
      y[t * w.n_rows + o] = s;
      if (abs_sum) (*abs_sum)[t * w.n_rows + o] = a;
    }
  }
}

inline void ref_rmsnorm(std::vector<double>& x, const std::vector<double>& w, int64_t n_rows, int64_t n, double eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += x[r * n + i] * x[r * n + i];
    const double s = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t i = 0; i < n; ++i) x[r * n + i] = x[r * n + i] * s * w[i];
  }
}

inline void ref_rope(std::vector<double>& x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                     const std::vector<int32_t>& pos, double base, double scale, bool neox,
                     const std::vector<float>* freq_factors = nullptr) {
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      double* v = x.data() + (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        const double theta = pos[t] * scale * std::pow(base, -2.0 * i / n_rot) / (freq_factors ? (*freq_factors)[i] : 1.0);
        const int64_t a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
        const double x0 = v[a], x1 = v[b];
        v[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
        v[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
    }
  }
}

// q [n_tok][n_head][d]; k, v [n_pos][n_kv][d] (every cache position up to start_pos + n_tok).
// window > 0: token at position P sees only positions p with P - p < window; scale 0: 1/sqrt(d).
inline std::vector<double> ref_attention(const std::vector<double>& q, const std::vector<double>& k,
                                         const std::vector<double>& v, int64_t start_pos, int64_t n_tok,
                                         int64_t n_head, int64_t n_kv, int64_t d, int64_t window = 0,
                                         double scale = 0, const std::vector<double>& sinks = {}) {
  std::vector<double> out(n_tok * n_head * d, 0.0);
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t kvh = h / (n_head / n_kv);
      const int64_t last = start_pos + t;
      std::vector<double> s(last + 1);
      double mx = -INFINITY;
      for (int64_t p = 0; p <= last; ++p) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += q[(t * n_head + h) * d + i] * k[(p * n_kv + kvh) * d + i];
        s[p] = window > 0 && last - p >= window ? -INFINITY : dot * scale;
        mx = std::max(mx, s[p]);
      }
      if (!sinks.empty()) mx = std::max(mx, sinks[h]);  // a sink: one more logit, in the denominator only
      double sum = sinks.empty() ? 0.0 : std::exp(sinks[h] - mx);
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int64_t p = 0; p <= last; ++p) {
        for (int64_t i = 0; i < d; ++i) out[(t * n_head + h) * d + i] += s[p] / sum * v[(p * n_kv + kvh) * d + i];
      }
    }
  }
  return out;
}

// gpt-oss's mixture of experts on p: the clamped gate and the four biases
// (pointers of the backend p runs on).
inline void set_gpt_oss_ffn(MoeFfnParams& p, const float* router_bias, const float* gate_bias, const float* up_bias,
                            const float* down_bias) {
  p.act = GatedActivation::kSwigluOai;
  p.router_bias = router_bias;
  p.gate_bias = gate_bias;
  p.up_bias = up_bias;
  p.down_bias = down_bias;
}

// The sizes of a matmul: output rows, row length, tokens.
struct MatmulShape {
  int64_t n_out, n_in, n_tok;
};

// Calls fn(type, shape, w, x) for every weight type and every shape whose
// row length is a whole number of the type's blocks, with a random weight
// `w` and random activations `x` of that shape; stops at a fatal failure.
template <typename Fn>
void for_each_matmul_case(const std::vector<MatmulShape>& shapes, std::mt19937_64& rng, Fn&& fn) {
  for (GgmlType type : all_weight_types()) {
    for (const MatmulShape& s : shapes) {
      if (s.n_in % ggml_type_traits(type).block_elems != 0) continue;
      const Weight w = random_weight(type, s.n_out, s.n_in, rng);
      const std::vector<float> x = random_floats(s.n_in * s.n_tok, rng);
      fn(type, s, w, x);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// The sizes of an attention call: cache capacity, first new position, new
// tokens, query heads, KV heads, head width.
struct AttentionShape {
  int64_t n_ctx, start_pos, n_tokens, n_head, n_kv_head, head_dim;
};

// An attention call of `shape` on these buffers (k_new and v_new null: the
// new rows are in the cache already); an F32 cache, the default scale and
// full causal attention unless the caller changes them.
inline AttentionParams attention_params(const AttentionShape& shape, const float* q, const float* k_new,
                                        const float* v_new, void* k_cache, void* v_cache, float* out) {
  return {.q = q, .k_new = k_new, .v_new = v_new, .k_cache = k_cache, .v_cache = v_cache,
          .n_ctx = shape.n_ctx, .start_pos = shape.start_pos, .n_tokens = shape.n_tokens, .n_head = shape.n_head,
          .n_kv_head = shape.n_kv_head, .head_dim = shape.head_dim, .out = out};
}

inline double ref_silu(double g) { return g / (1.0 + std::exp(-g)); }

inline double ref_gelu_tanh(double g) {
  return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
}

inline std::vector<double> to_double(const std::vector<float>& f) { return {f.begin(), f.end()}; }

}  // namespace layerstream::kernels::testing

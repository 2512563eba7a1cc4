// Row-parallel CPU kernels: embedding, RMSNorm, RoPE, SiLU-mul, GELU-mul, scale, add.
#include <string>

#include "kernels/cpu/activation_simd.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/ops.h"
#include "kernels/math/activation.h"
#include "kernels/math/convert_row.h"
#include "kernels/math/rmsnorm.h"
#include "kernels/math/rope.h"

namespace layerstream::kernels::cpu {

Status embedding(const EmbeddingParams& p, ThreadPool* pool) {
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    if (p.tokens[t] < 0 || p.tokens[t] >= p.n_vocab) {
      return Status::InvalidArgument("embedding: token " + std::to_string(t) + " has id " +
                                     std::to_string(p.tokens[t]) + ", outside the vocabulary [0, " +
                                     std::to_string(p.n_vocab) + ")");
    }
  }
  const uint64_t row_bytes = ggml_row_bytes(ggml_type_traits(p.type), p.n_embd);
  parallel_rows(pool, p.n_tokens, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const auto* row = static_cast<const uint8_t*>(p.table) + static_cast<uint64_t>(p.tokens[t]) * row_bytes;
      // Cannot fail: type and n_embd were validated.
      (void)math::decode_row(p.type, row, p.n_embd, p.out + t * p.n_embd);
    }
  });
  return Status::OK();
}

void rmsnorm(const RmsNormParams& p, ThreadPool* pool) {
  parallel_rows(pool, p.n_rows, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* x = p.x + r * p.n_cols;
      float* out = p.out + r * p.n_cols;
      // Sum of squares in 8 lanes (vectorisable), then the shared per-row scale.
      float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t i = 0;
      for (; i + 8 <= p.n_cols; i += 8) {
        for (int l = 0; l < 8; ++l) lanes[l] += x[i + l] * x[i + l];
      }
      float sum_sq = 0;
      for (float l : lanes) sum_sq += l;
      for (; i < p.n_cols; ++i) sum_sq += x[i] * x[i];
      const float s = math::rms_inv_scale(sum_sq, p.n_cols, p.eps);
      for (int64_t j = 0; j < p.n_cols; ++j) out[j] = x[j] * s * p.weight[j];
    }
  });
}

// YaRN's per-call constants (ramp ends and magnitude; none when ext_factor is 0).
struct RopeYarn {
  float low = 0, high = 0, mscale = 1;
  RopeYarn(const RopeParams& p, int64_t n_rot) {
    if (p.ext_factor != 0) math::rope_yarn_corr_dims(n_rot, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, low, high);
    mscale = math::rope_yarn_mscale(p.freq_scale, p.ext_factor, p.attn_factor);
  }
  float theta(const RopeParams& p, int32_t pos, int64_t i, int64_t n_rot) const {
    return math::rope_theta_ext(pos, i, n_rot, p.freq_base, p.freq_scale, p.freq_factors ? p.freq_factors[i] : 1.0f,
                                p.ext_factor, low, high);
  }
};

// The angles' cos and sin for one token (times YaRN's magnitude): the same
// bits rope_rotate computes, kept between calls: a decode step ropes Q
// and K of every layer at the same position, 2 x n_layers calls that would
// each redo n_rot / 2 powf and sincosf (about 2 % of a SmolLM2 token).
struct RopeAngles {
  int32_t pos = -1;
  int64_t n_rot = 0;
  float freq_base = 0, freq_scale = 0, ext_factor = 0, attn_factor = 0, beta_fast = 0, beta_slow = 0;
  int32_t n_ctx_orig = 0;
  bool valid = false;
  float cos[kMaxHeadDim / 2], sin[kMaxHeadDim / 2];

  bool same(int32_t position, const RopeParams& p, int64_t rot) const {
    return valid && !p.freq_factors && position == pos && rot == n_rot && p.freq_base == freq_base &&
           p.freq_scale == freq_scale && p.ext_factor == ext_factor && p.attn_factor == attn_factor &&
           p.beta_fast == beta_fast && p.beta_slow == beta_slow && p.n_ctx_orig == n_ctx_orig;
  }

  const RopeAngles& at(int32_t position, const RopeParams& p, int64_t rot, const RopeYarn& yarn) {
    // Per-pair factors (Llama 3.1) are data, not a key: those calls recompute.
    if (same(position, p, rot)) return *this;
    for (int64_t i = 0; i < rot / 2; ++i) {
      const float theta = yarn.theta(p, position, i, rot);
      cos[i] = cosf(theta) * yarn.mscale;
      sin[i] = sinf(theta) * yarn.mscale;
    }
    pos = position;
    n_rot = rot;
    freq_base = p.freq_base;
    freq_scale = p.freq_scale;
    ext_factor = p.ext_factor;
    attn_factor = p.attn_factor;
    beta_fast = p.beta_fast;
    beta_slow = p.beta_slow;
    n_ctx_orig = p.n_ctx_orig;
    valid = !p.freq_factors;
    return *this;
  }
};

void rope(const RopeParams& p, ThreadPool* pool) {
  const int64_t n_rot = p.n_rot == 0 ? p.head_dim : p.n_rot;
  const RopeYarn yarn(p, n_rot);
  if (n_rot / 2 > kMaxHeadDim / 2) {  // wider than any head the kernels take: no table
    parallel_rows(pool, p.n_tokens, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        for (int64_t i = 0; i < n_rot / 2; ++i) {
          const float theta = yarn.theta(p, p.positions[t], i, n_rot);
          int64_t i0, i1;
          math::rope_pair_index(i, n_rot, p.neox, i0, i1);
          for (int64_t h = 0; h < p.n_heads; ++h) {
            float* head = p.x + (t * p.n_heads + h) * p.head_dim;
            math::rope_rotate(head[i0], head[i1], theta, yarn.mscale);
          }
        }
      }
    });
    return;
  }
  parallel_rows(pool, p.n_tokens, 1, [&](int64_t begin, int64_t end) {
    // Per thread (pool workers and the stream's thread): no sharing.
    thread_local RopeAngles angles;
    for (int64_t t = begin; t < end; ++t) {
      const RopeAngles& a = angles.at(p.positions[t], p, n_rot, yarn);
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        int64_t i0, i1;
        math::rope_pair_index(i, n_rot, p.neox, i0, i1);
        const float c = a.cos[i], s = a.sin[i];
        for (int64_t h = 0; h < p.n_heads; ++h) {
          float* head = p.x + (t * p.n_heads + h) * p.head_dim;
          const float x0 = head[i0], x1 = head[i1];  // as rope_rotate
          head[i0] = x0 * c - x1 * s;
          head[i1] = x0 * s + x1 * c;
        }
      }
    }
  });
}

// The gated activations: AVX-512 where the CPU has it (activation_simd.h;
// libm's expf / tanhf per element were 10-15% of a prefill pass).
void silu_mul(const SiluMulParams& p, ThreadPool* pool) {
  static const bool simd = avx512::supported();  // once: CPUID traps in a VM
  parallel_rows(pool, p.n, 4096, [&](int64_t begin, int64_t end) {
    if (simd) return avx512::silu_mul(p.gate + begin, p.up + begin, p.out + begin, end - begin);
    for (int64_t i = begin; i < end; ++i) p.out[i] = math::silu_mul(p.gate[i], p.up[i]);
  });
}

void gelu_mul(const GeluMulParams& p, ThreadPool* pool) {
  static const bool simd = avx512::supported();
  parallel_rows(pool, p.n, 4096, [&](int64_t begin, int64_t end) {
    if (simd) return avx512::gelu_mul(p.gate + begin, p.up + begin, p.out + begin, end - begin);
    for (int64_t i = begin; i < end; ++i) p.out[i] = math::gelu_mul(p.gate[i], p.up[i]);
  });
}

void scale(const ScaleParams& p, ThreadPool* pool) {
  parallel_rows(pool, p.n, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p.out[i] = p.x[i] * p.factor;
  });
}

void add(const AddParams& p, ThreadPool* pool) {
  parallel_rows(pool, p.n, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p.out[i] = p.a[i] + p.b[i];
  });
}

}  // namespace layerstream::kernels::cpu

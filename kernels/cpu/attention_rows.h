// The two inner loops of CPU attention over f32 or f16 cache rows, vectorised for
// the CPU (AVX-512 where present, portable C++ otherwise; picked once by
// CPUID): the scores of a group of query heads against consecutive K rows,
// and the probability-weighted sum of V rows. Rows are head_dim elements,
// `stride` elements apart; the f16 overloads take the cache's IEEE half bits
// and convert in registers. Pure functions, thread-safe.
#pragma once

#include <cstdint>

namespace layerstream::kernels::cpu {

// s[g * n_pos + i] = scale * (q[g * hd ..] . k[i * stride ..]) for g < group, i < n_pos.
void attention_scores(const float* k, int64_t stride, int64_t n_pos, const float* q, int64_t group, int64_t hd,
                      float scale, float* s);
void attention_scores(const uint16_t* k, int64_t stride, int64_t n_pos, const float* q, int64_t group, int64_t hd,
                      float scale, float* s);
// out[g * hd + d] += sum_i p[g * n_pos + i] * v[i * stride + d].
void attention_weighted_sum(const float* v, int64_t stride, int64_t n_pos, const float* p, int64_t group, int64_t hd,
                            float* out);
void attention_weighted_sum(const uint16_t* v, int64_t stride, int64_t n_pos, const float* p, int64_t group,
                            int64_t hd, float* out);

}  // namespace layerstream::kernels::cpu

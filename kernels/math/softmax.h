// Softmax helpers shared by the CPU and CUDA kernels: the running ("online")
// softmax attention uses, so scores never need a buffer of the context length.
#pragma once

#include <cmath>

#include "kernels/math/host_device.h"

namespace layerstream::math {

// State of a running softmax over scores seen so far: max m and
// sum l = sum_j exp(s_j - m). Accumulators weighted by exp(s_j - m) must be
// multiplied by the `rescale` factor each push returns before adding the new
// term with weight `weight`.
struct OnlineSoftmax {
  float m = -INFINITY;
  float l = 0.0f;

  // Adds score s. Sets rescale (factor for existing accumulators) and weight
  // (factor for the new value).
  LS_HD void push(float s, float& rescale, float& weight) {
    const float m_new = s > m ? s : m;
    rescale = expf(m - m_new);  // m = -inf on the first push gives 0
    weight = expf(s - m_new);
    l = l * rescale + weight;
    m = m_new;
  }

  // Merges another state into this one. Sets the factors for this state's
  // accumulators (self_scale) and the other's (other_scale).
  LS_HD void merge(const OnlineSoftmax& o, float& self_scale, float& other_scale) {
    const float m_new = o.m > m ? o.m : m;
    self_scale = m == -INFINITY ? 0.0f : expf(m - m_new);
    other_scale = o.m == -INFINITY ? 0.0f : expf(o.m - m_new);
    l = l * self_scale + o.l * other_scale;
    m = m_new;
  }
};

}  // namespace layerstream::math

#include "runtime/planning/stats.h"

#include <algorithm>

namespace layerstream::planning {

MinMedMax summarize(std::vector<double> v) {
  MinMedMax r;
  if (v.empty()) return r;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  r.min = v.front();
  r.max = v.back();
  r.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  r.median = std::clamp(r.median, r.min, r.max);
  return r;
}

}  // namespace layerstream::planning

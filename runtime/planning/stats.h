// Small statistics for benchmark figures: min / median / max of a sample.
#pragma once

#include <vector>

namespace layerstream::planning {

struct MinMedMax {
  double min = 0, median = 0, max = 0;
};

// Min, median (mean of the two middle values for an even count) and max of
// `values`; all zero when empty. min <= median <= max always holds.
MinMedMax summarize(std::vector<double> values);

}  // namespace layerstream::planning

// LatencyHistogram: seconds counted into fixed buckets, the shape of a
// Prometheus histogram (cumulative `le` buckets, _sum, _count when rendered).
// The bucket bounds are vLLM's, so dashboards made for vLLM read ours.
//
// Thread safety: none; the scheduler guards it with its mutex.
#pragma once

#include <cstdint>
#include <vector>

namespace layerstream::serve {

struct LatencyHistogram {
  std::vector<double> bounds;    // upper bounds, increasing; +Inf is implied
  std::vector<uint64_t> counts;  // per bucket (not cumulative), bounds.size() + 1
  double sum = 0;
  uint64_t count = 0;

  explicit LatencyHistogram(std::vector<double> upper_bounds = {})
      : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

  void observe(double seconds) {
    size_t i = 0;
    while (i < bounds.size() && seconds > bounds[i]) ++i;
    ++counts[i];
    sum += seconds;
    ++count;
  }

  // vLLM's buckets for time to first token and for the time between tokens.
  static LatencyHistogram time_to_first_token() {
    return LatencyHistogram({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                             10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0});
  }
  static LatencyHistogram inter_token_latency() {
    return LatencyHistogram({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                             10.0, 20.0, 40.0, 80.0});
  }
};

}  // namespace layerstream::serve

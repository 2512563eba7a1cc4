// The /metrics body in Prometheus text format: our layerstream_* names, and
// the vllm:* names that gateways and dashboards made for vLLM scrape
// (request counts, KV cache use, prefix-cache queries and hits, latency
// histograms), computed from the same counters.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/serve/batch_scheduler.h"

namespace layerstream::serve {

struct HttpCounters {
  uint64_t requests = 0, errors = 0;
  double uptime_s = 0;
};

// `model_id` labels the vllm:* series (model_name="..."), as vLLM does.
std::string render_metrics(const SchedulerMetrics& m, const HttpCounters& http, const std::string& model_id);

}  // namespace layerstream::serve

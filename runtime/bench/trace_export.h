// Chrome trace-event JSON for a bench run (opens in Perfetto / about:tracing):
// one process per strategy (pid = 1 + index, named by a process_name
// metadata event), threads 1 compute / 2 copy / 3 disk; every event is a
// complete event (ph "X") with ts and dur in microseconds, name
// "<kind> <layer>", cat = kind, args {layer, slot, pass, bytes}. Times are
// each runner's own executor time base.
#pragma once

#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/bench/bench_result.h"

namespace layerstream::bench {

// `events[i]` belongs to `result.strategies[i]` (skipped strategies: empty).
std::string bench_chrome_json(const BenchResult& result, const std::vector<std::vector<sched::TraceEvent>>& events);
Status write_text_file(const std::string& path, const std::string& text);

}  // namespace layerstream::bench

// The bench session: runs several strategies' runners side by side and
// collects their measured passes.
//
// Schedule:
//  - interleaved (preferred): every runner is created up front, then the
//    warm-up passes and the measured passes go round-robin, one measured
//    pass per strategy per round (the order rotates each round), so slow
//    drift of the box (page cache, clocks, other load) hits every strategy
//    alike. Each measured pass is preceded by `settle_passes` unmeasured
//    passes of the same runner: a runner's cyclic prefetch (the next pass's
//    first layers, loaded while its last layers compute) would otherwise
//    finish for free while other runners run, and its reads would overlap
//    the next runner's pass; after a settle pass the measured pass starts
//    in the steady state of back-to-back passes and nothing else runs;
//  - blocks: when the runners do not fit in memory together (sum of
//    footprints > memory_available) or creating them together fails for
//    lack of memory, each strategy runs alone in turn: create, warm up, a
//    block of passes, destroy; the blocks alternate over `block_rounds`
//    rounds.
// Thread safety: single-threaded; the runners are used from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/bench/bench_result.h"
#include "runtime/bench/bench_runner.h"

namespace layerstream::bench {

struct SessionOptions {
  int warmup = 1;                 // passes per strategy before measuring (per block in block mode)
  int passes = 5;                 // measured passes per strategy, >= 1
  int settle_passes = 1;          // interleaved: unmeasured passes before each measured one (see above)
  uint64_t memory_available = 0;  // bytes all runners may hold at once; 0 = no limit known
  bool force_blocks = false;
  int block_rounds = 2;           // block mode: rounds (clamped to [1, passes])
  // Called with a one-line progress message (e.g. "interleaved: 3 runners").
  std::function<void(const std::string&)> progress;
};

struct SessionOutput {
  std::vector<StrategyResult> strategies;  // in spec order; timelines and layer bars filled
  std::string schedule;                    // "interleaved" or "blocks"
  std::string schedule_reason;
  double link_gbps = 0;                    // from the last runner alive (its cost model)
  double disk_gbps = 0;
  // All measured passes' events per strategy (raw executor times), for --trace.
  std::vector<std::vector<sched::TraceEvent>> trace;
};

// Errors: InvalidArgument for options; the first runner's creation or pass
// error otherwise (with the strategy's name).
Result<SessionOutput> run_session(const std::vector<StrategySpec>& specs, const SessionOptions& options);

// Fills result.timeline and result.layers from one pass (the one whose time
// is the median) given that pass's events and the runner's layers.
void fill_timeline(StrategyResult& result, const std::vector<sched::TraceEvent>& events,
                   const std::vector<LayerDesc>& layers);

}  // namespace layerstream::bench

// CudaTimeline: event timestamps that stay precise over long runs.
//
// cudaEventElapsedTime returns float milliseconds. The scheduler times every
// event of a run from one reference event recorded at start-up, so after an
// hour (3.6e6 ms) the float's step is 0.25 ms and after ~17 minutes it is
// coarser than a small layer's compute: the cost model would see quantised
// samples. The timeline fixes this below the Event interface:
//   - it records an *anchor* event on its own idle stream whenever the newest
//     anchor is older than `period` of host time (1 s by default);
//   - each CudaEvent remembers the newest anchor when it is recorded;
//   - a time is composed as offset(anchor) + elapsed(anchor, event), where
//     offset is a double summed link by link from the first anchor (each
//     link about one period, so its float step is ~0.06 us) and
//     elapsed(anchor, event) is a short float interval.
// Two events with the same anchor are timed directly (a short interval).
// Thread safety: all members may be called from any thread (one mutex).
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <mutex>

#include "layerstream/status.h"
#include "runtime/device/cuda/cuda_owners.h"

namespace layerstream::cuda {

class CudaTimeline {
 public:
  // One anchor event; `offset_ms` (from the first anchor) is known once
  // `resolved`, after which `prev` is dropped so old anchors are freed.
  struct Anchor {
    UniqueEvent event;
    std::shared_ptr<Anchor> prev;
    bool resolved = false;
    double offset_ms = 0;
  };

  static constexpr std::chrono::milliseconds kDefaultPeriod{1000};

  // Creates the timer stream and records the first anchor (offset 0).
  static Result<std::shared_ptr<CudaTimeline>> create(std::chrono::nanoseconds period = kDefaultPeriod);

  // The anchor for an event being recorded now. Never fails: if a fresh
  // anchor cannot be recorded, the newest one serves (less precise, not wrong).
  std::shared_ptr<Anchor> anchor_for_record();

  // Milliseconds from `start` to `end` (both recorded and complete), each
  // with the anchor it was recorded under. Negative if `end` came first.
  Result<double> elapsed_ms(cudaEvent_t start, const std::shared_ptr<Anchor>& start_anchor, cudaEvent_t end,
                            const std::shared_ptr<Anchor>& end_anchor);

  // Anchors recorded so far (tests: proves the composed path was taken).
  int anchors_recorded() const;

 private:
  CudaTimeline(UniqueStream stream, std::chrono::nanoseconds period) : stream_(std::move(stream)), period_(period) {}
  // Resolves `a` (and the unresolved anchors before it). REQUIRES mu_ held.
  Status resolve(Anchor& a);

  mutable std::mutex mu_;
  UniqueStream stream_;                     // records anchors only: never busy
  const std::chrono::nanoseconds period_;
  std::shared_ptr<Anchor> newest_;          // guarded by mu_
  std::chrono::steady_clock::time_point newest_at_;  // guarded by mu_
  int anchors_ = 0;                         // guarded by mu_
};

}  // namespace layerstream::cuda

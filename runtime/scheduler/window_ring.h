// WindowRing: where each streamed layer lands in the window, a ring of
// variable-size regions. Slots are fitted to the layers they hold, so one big
// layer (an output head) does not set the size of every slot.
//
// Streamed layers are placed in streaming order (g = 0, 1, 2, ... over
// passes). A layer goes at the ring's head when it fits before the end, else
// at offset 0 (the tail is left unused until the head passes it again). The
// placement reports the latest earlier layer, among the last `horizon`, whose
// region it overwrites: that layer's compute must finish before this layer's
// load may start (the executor waits on its "done" event; the simulator on
// its end time). Layers older than the horizon must be known finished by the
// caller (the executor waits for the compute of g - W anyway). Loads run on
// more than one stream (RAM-tier copies, staged disk copies), so one load's
// wait does not order another's: every overlap within the horizon counts.
//
// The executor and the simulator both use this class, so the simulator's
// window matches the executor's byte for byte.
// Thread safety: none (one owner).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace layerstream::sched {

class WindowRing {
 public:
  struct Placement {
    uint64_t offset = 0;   // bytes from the window's start
    int64_t overlaps = -1; // latest earlier layer g' whose region this one overwrites; -1: none live
  };
  WindowRing() = default;
  // REQUIRES: capacity > 0.
  // REQUIRES: horizon >= 1.
  WindowRing(uint64_t capacity, uint64_t horizon) : capacity_(capacity), horizon_(horizon) {}

  // Places layer g (REQUIRES: g one more than the previous call's, starting
  // at 0; 0 < span <= capacity).
  Placement place(uint64_t g, uint64_t span);
  uint64_t capacity() const { return capacity_; }

 private:
  struct Live {
    uint64_t g, offset, span;
  };
  uint64_t capacity_ = 0;
  uint64_t horizon_ = 1;
  uint64_t head_ = 0;
  std::deque<Live> live_;  // oldest first
};

// Where each streamed layer of one plan epoch goes in the executor's window,
// in streaming order g (over passes): its region's offset, and the streamed
// layer whose compute must finish before its load may write there (the
// latest earlier layer its region overwrites, or g - W: a load waits for the
// compute of g - W anyway; W = prefetch depth + 1). Placements are made on
// demand (at) and dropped once no load or compute needs them (forget_before).
// Thread safety: none (the pass loop's thread).
class WindowSchedule {
 public:
  struct Placed {
    uint64_t offset = 0;  // in the window
    int64_t need = -1;    // compute of this streamed layer must finish before the load (-1: none)
  };
  // A new epoch: a window of window_bytes, `window_layers` (W) streamed
  // layers ahead at most, and the spans of the plan's streamed layers in
  // streaming order (layer g has spans[g % spans.size()]).
  void reset(uint64_t window_bytes, int window_layers, std::vector<uint64_t> spans);
  // Streamed layer g's placement. REQUIRES: g not forgotten; spans not empty.
  // Valid until the next call.
  const Placed& at(uint64_t g);
  // Drops the placements of the layers before g.
  void forget_before(uint64_t g);

 private:
  WindowRing ring_;
  int64_t window_layers_ = 1;
  std::vector<uint64_t> spans_;
  std::deque<Placed> placed_;  // layers base_ .. base_ + size - 1
  uint64_t base_ = 0;
};

// The window a plan needs so that `slots` consecutive streamed layers fit:
// the largest sum of `slots` cyclically consecutive spans (spans in streaming
// order). 0 when nothing streams.
uint64_t window_bytes_for(const std::vector<uint64_t>& streamed_spans, int slots);

}  // namespace layerstream::sched

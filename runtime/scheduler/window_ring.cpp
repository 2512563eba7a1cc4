#include "runtime/scheduler/window_ring.h"

#include <algorithm>
#include <utility>

#include "layerstream/status.h"
#include "runtime/core/status_macros.h"

namespace layerstream::sched {

WindowRing::Placement WindowRing::place(uint64_t g, uint64_t span) {
  LS_CHECK(span > 0 && span <= capacity_);
  while (!live_.empty() && live_.front().g + horizon_ < g) live_.pop_front();
  Placement p;
  p.offset = head_ + span <= capacity_ ? head_ : 0;
  const uint64_t end = p.offset + span;
  for (const Live& l : live_)
    if (l.offset < end && p.offset < l.offset + l.span) p.overlaps = static_cast<int64_t>(l.g);
  live_.push_back({g, p.offset, span});
  head_ = end;
  return p;
}

void WindowSchedule::reset(uint64_t window_bytes, int window_layers, std::vector<uint64_t> spans) {
  ring_ = WindowRing(std::max<uint64_t>(1, window_bytes), static_cast<uint64_t>(std::max(1, window_layers)));
  window_layers_ = window_layers;
  spans_ = std::move(spans);
  placed_.clear();
  base_ = 0;
}

const WindowSchedule::Placed& WindowSchedule::at(uint64_t g) {
  LS_CHECK(g >= base_);
  const uint64_t m = spans_.size();
  while (base_ + placed_.size() <= g) {
    const uint64_t h = base_ + placed_.size();
    const WindowRing::Placement pl = ring_.place(h, spans_[h % m]);
    placed_.push_back({pl.offset, std::max<int64_t>(pl.overlaps, static_cast<int64_t>(h) - window_layers_)});
  }
  return placed_[g - base_];
}

void WindowSchedule::forget_before(uint64_t g) {
  while (base_ < g && !placed_.empty()) {
    placed_.pop_front();
    ++base_;
  }
}

uint64_t window_bytes_for(const std::vector<uint64_t>& spans, int slots) {
  const size_t m = spans.size();
  if (m == 0 || slots < 1) return 0;
  // Full cycles of every streamed layer, then the largest run of the rest.
  uint64_t all = 0;
  for (uint64_t s : spans) all += s;
  const size_t w = static_cast<size_t>(slots) % m;
  uint64_t best = 0;
  if (w > 0) {
    uint64_t sum = 0;  // sliding sum of spans[start .. start + w) (cyclic)
    for (size_t j = 0; j < w; ++j) sum += spans[j];
    best = sum;
    for (size_t start = 1; start < m; ++start) {
      sum = sum - spans[start - 1] + spans[(start + w - 1) % m];
      best = std::max(best, sum);
    }
  }
  return all * (static_cast<uint64_t>(slots) / m) + best;
}

}  // namespace layerstream::sched

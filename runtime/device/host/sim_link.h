// SimLink: the host backend's model of a host-to-device link of a fixed
// bandwidth, shared by every stream of one device (like one copy engine):
// copies are served one after another, each taking bytes / rate seconds, and
// a copy's data is written in chunks paced to that rate.
// Units: gbps is decimal gigabytes per second (1 GB = 1e9 bytes, as in
// units.h), so 512 MiB at 2 GB/s takes 536870912 / 2e9 = 0.268 s.
// Thread safety: reserve() is internally locked; copy() runs on the caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>

namespace layerstream::host {

class SimLink {
 public:
  // gbps <= 0 means unthrottled.
  explicit SimLink(double gbps) : gbps_(gbps) {}
  double gbps() const { return gbps_; }

  // Copies `bytes` from src to dst; with a throttle returns no earlier than
  // the end of this copy's slot on the link (the slot starts when the link is
  // free and lasts bytes / rate).
  void copy(void* dst, const void* src, size_t bytes);

 private:
  using Clock = std::chrono::steady_clock;
  const double gbps_;
  std::mutex mu_;
  Clock::time_point free_at_{};  // when the link finishes its last reserved copy
};

}  // namespace layerstream::host

#include "runtime/device/host/sim_link.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace layerstream::host {
namespace {
constexpr size_t kChunk = size_t{4} << 20;  // pacing granularity, bytes
}  // namespace

void SimLink::copy(void* dst, const void* src, size_t bytes) {
  if (gbps_ <= 0) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const double rate = gbps_ * 1e9;  // bytes per second
  auto at = [rate](size_t n) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(n / rate));
  };
  Clock::time_point start;
  {
    std::lock_guard<std::mutex> lock(mu_);
    start = std::max(Clock::now(), free_at_);
    free_at_ = start + at(bytes);
  }
  std::this_thread::sleep_until(start);
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kChunk, bytes - done);
    std::memcpy(d + done, s + done, n);
    done += n;
    std::this_thread::sleep_until(start + at(done));
  }
}

}  // namespace layerstream::host

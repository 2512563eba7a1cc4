// Arena bookkeeping: first-fit over an ordered free list, alignment applied to
// the absolute address, neighbouring free ranges merged on free. Front padding
// left by alignment stays in the free list, so nothing is lost to it.
#include "runtime/device/arena.h"

#include <algorithm>
#include <string>

#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"

namespace layerstream {
namespace {

std::string bytes_text(uint64_t b) { return format_bytes(b) + " (" + std::to_string(b) + " B)"; }

}  // namespace

Arena::Arena(void* base, uint64_t budget_bytes, std::function<void(void*)> release)
    : base_(base), budget_(budget_bytes), release_(std::move(release)) {
  if (budget_ > 0) free_.emplace(0, budget_);
}

Arena::~Arena() {
  if (!live_.empty()) {
    LS_LOG_DEBUG("arena: destroyed with {} live region(s), {} in use", live_.size(), format_bytes(used_));
  }
  if (release_ && base_) release_(base_);
}

Result<ArenaRegion> Arena::allocate(std::string_view name, uint64_t bytes, uint64_t alignment) {
  if (bytes == 0) {
    return Status::InvalidArgument("arena: region '" + std::string(name) + "' asks for 0 bytes");
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return Status::InvalidArgument("arena: region '" + std::string(name) + "' alignment " +
                                   std::to_string(alignment) + " is not a power of two");
  }
  const uintptr_t base_addr = reinterpret_cast<uintptr_t>(base_);
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t largest = 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t off = it->first;
    const uint64_t size = it->second;
    largest = std::max(largest, size);
    if (size < bytes) continue;
    // Align the absolute address; compute in offsets so nothing overflows
    // (off + size <= budget, and alignment - 1 < 2^63).
    const uint64_t addr = base_addr + off;
    const uint64_t pad = (alignment - (addr & (alignment - 1))) & (alignment - 1);
    if (pad > size || size - pad < bytes) continue;
    const uint64_t start = off + pad;
    const uint64_t tail = size - pad - bytes;
    free_.erase(it);
    if (pad > 0) free_.emplace(off, pad);
    if (tail > 0) free_.emplace(start + bytes, tail);
    live_.emplace(start, bytes);
    used_ += bytes;
    return ArenaRegion{static_cast<char*>(base_) + start, start, bytes, std::string(name)};
  }
  return Status::OutOfBudget("arena: cannot allocate region '" + std::string(name) + "' of " +
                             bytes_text(bytes) + " aligned to " + std::to_string(alignment) +
                             ": budget " + bytes_text(budget_) + ", in use " + bytes_text(used_) +
                             ", largest free range " + bytes_text(largest));
}

void Arena::free(const ArenaRegion& region) {
  std::lock_guard<std::mutex> lock(mu_);
  auto live = live_.find(region.offset);
  LS_CHECK_MSG(live != live_.end() && live->second == region.bytes,
               "Arena::free of a region not allocated from this arena (or freed twice): '" + region.name + "'");
  uint64_t off = live->first;
  uint64_t size = live->second;
  live_.erase(live);
  used_ -= size;
  auto next = free_.lower_bound(off);
  if (next != free_.end() && off + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += size;
      return;
    }
  }
  free_.emplace(off, size);
}

uint64_t Arena::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

uint64_t Arena::largest_free() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t largest = 0;
  for (const auto& [off, size] : free_) largest = std::max(largest, size);
  return largest;
}

}  // namespace layerstream

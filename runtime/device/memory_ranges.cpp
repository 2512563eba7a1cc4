#include "runtime/device/memory_ranges.h"

#include <string>

#include "fmt/format.h"

namespace layerstream {

void MemoryRanges::add(const void* base, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  ranges_[reinterpret_cast<uintptr_t>(base)] = bytes;
}

void MemoryRanges::remove(const void* base) {
  std::lock_guard<std::mutex> lock(mu_);
  ranges_.erase(reinterpret_cast<uintptr_t>(base));
}

Status MemoryRanges::check(const void* ptr, size_t bytes, std::string_view what) const {
  if (ptr == nullptr) return Status::InvalidArgument(fmt::format("{} is a null pointer", what));
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.upper_bound(p);
  if (it != ranges_.begin()) {
    --it;
    const uint64_t off = p - it->first;
    if (off <= it->second && bytes <= it->second - off) return Status::OK();
    if (off < it->second) {
      return Status::InvalidArgument(
          fmt::format("{} [{}, +{} B) runs past the end of its arena ({} B at {}, {} B left)", what, ptr,
                      bytes, it->second, reinterpret_cast<const void*>(it->first), it->second - off));
    }
  }
  return Status::InvalidArgument(
      fmt::format("{} {} (+{} B) is not inside any arena of this device", what, ptr, bytes));
}

Status check_no_overlap(const void* a, const void* b, size_t bytes, std::string_view what) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(a);
  const uintptr_t y = reinterpret_cast<uintptr_t>(b);
  if ((x < y ? y - x : x - y) < bytes) {
    return Status::InvalidArgument(
        fmt::format("{}: source {} and destination {} overlap within {} B", what, b, a, bytes));
  }
  return Status::OK();
}

}  // namespace layerstream

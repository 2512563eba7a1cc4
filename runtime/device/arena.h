// Arena: one up-front block of device memory carved into named, aligned
// regions. No device allocation happens after start-up; the budget is a hard
// limit that is never exceeded.
//
// The Arena does the bookkeeping only; the memory comes from a backend
// (cudaMalloc or page-aligned RAM) and is returned through `release`.
// Thread safety: allocate/free/used are internally locked.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "layerstream/status.h"

namespace layerstream {

struct ArenaRegion {
  void* ptr = nullptr;   // device pointer
  uint64_t offset = 0;   // from the arena base, bytes
  uint64_t bytes = 0;
  std::string name;
};

class Arena {
 public:
  // Takes ownership of [base, base + budget_bytes); calls release(base) on destruction.
  Arena(void* base, uint64_t budget_bytes, std::function<void(void*)> release);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Carves `bytes` aligned to `alignment` (a power of two). OutOfBudget when
  // no free range fits, naming the request, the budget, the bytes in use and
  // the largest free range.
  Result<ArenaRegion> allocate(std::string_view name, uint64_t bytes, uint64_t alignment = 256);
  // Returns a region to the free list (adjacent free ranges merge).
  // REQUIRES: `region` came from this arena and was not freed yet.
  void free(const ArenaRegion& region);

  uint64_t budget() const { return budget_; }
  uint64_t used() const;
  // Size of the largest free range (an upper bound on the next allocation).
  uint64_t largest_free() const;
  void* base() const { return base_; }

 private:
  void* base_;
  uint64_t budget_;
  std::function<void(void*)> release_;
  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;  // offset -> bytes, non-adjacent
  std::map<uint64_t, uint64_t> live_;  // offset -> bytes (as allocated, incl. padding)
  uint64_t used_ = 0;
};

}  // namespace layerstream

// MemoryRanges: the device-memory ranges (arenas) a backend has handed out,
// so a copy can check that its device pointers lie inside one of them before
// any work is enqueued (an out-of-range copy is an InvalidArgument here,
// rather than a corrupted heap on host or a lost context on cuda).
// Thread safety: all methods are internally locked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>

#include "layerstream/status.h"

namespace layerstream {

class MemoryRanges {
 public:
  void add(const void* base, uint64_t bytes);
  void remove(const void* base);
  // OK when [ptr, ptr + bytes) lies inside one registered range. `what` names
  // the argument in the error ("copy_h2d destination").
  Status check(const void* ptr, size_t bytes, std::string_view what) const;

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, uint64_t> ranges_;  // base address -> bytes
};

// InvalidArgument when [a, a + bytes) and [b, b + bytes) overlap (device-to-device copies).
Status check_no_overlap(const void* a, const void* b, size_t bytes, std::string_view what);

}  // namespace layerstream

// FaultInjector: IoHooks that make chosen reads fail or come back short, and
// can make io_uring unavailable or O_DIRECT refused. Used by the io tests and
// the end-to-end fault tests: pass it as ReaderOptions::hooks.
//
// Thread safety: all methods are thread-safe (pread workers call after_read).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

#include "io/io_hooks.h"

namespace layerstream::io {

enum class FaultKind { kShortRead, kEintr, kEagain, kEio };
inline constexpr int kFaultKindCount = 4;

struct FaultRule {
  FaultKind kind = FaultKind::kEio;
  // A read matches when its start offset is in [offset_begin, offset_end).
  uint64_t offset_begin = 0;
  uint64_t offset_end = UINT64_MAX;
  uint64_t skip = 0;   // matching reads let through before the first fault
  uint64_t count = 1;  // faults injected, then the rule is spent (UINT64_MAX: forever)
  // kShortRead: bytes reported (0: half of what was asked). Only shortens.
  size_t short_bytes = 0;
};

class FaultInjector final : public IoHooks {
 public:
  void add(const FaultRule& rule);
  // io_uring setup fails with `err` (ENOSYS, EPERM); 0 clears.
  void fail_uring_setup(int err);
  // open with O_DIRECT fails with `err` (EINVAL as on tmpfs); 0 clears.
  void fail_direct_open(int err);

  uint64_t injected(FaultKind kind) const;
  uint64_t reads_seen() const;

  int before_uring_setup() override;
  int before_open(const std::string& path, bool direct) override;
  void after_read(uint64_t offset, size_t requested, int64_t& result) override;

 private:
  struct Rule {
    FaultRule spec;
    uint64_t matched = 0;
    uint64_t fired = 0;
  };
  mutable std::mutex mu_;
  std::vector<Rule> rules_;
  int uring_err_ = 0;
  int direct_err_ = 0;
  uint64_t reads_ = 0;
  std::array<uint64_t, kFaultKindCount> injected_{};
};

}  // namespace layerstream::io

// The host backend as a test device.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "runtime/device/device.h"

namespace layerstream::testing {

// The host backend with `threads` compute threads, copies timed as over a
// link of `sim_link_gbps` (0: not simulated) and, with `copies_only`, memory
// only copies reach (as on CUDA); a test failure (and nullptr) if it cannot
// be opened.
inline std::unique_ptr<Device> open_host_device(int threads, double sim_link_gbps = 0, bool copies_only = false) {
  DeviceOptions o;
  o.backend = BackendKind::kHost;
  o.host_threads = threads;
  o.sim_link_gbps = sim_link_gbps;
  o.copies_only = copies_only;
  auto d = open_device(o);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : nullptr;
}

}  // namespace layerstream::testing

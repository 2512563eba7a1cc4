// The host backend: device memory is budgeted, page-aligned RAM; streams are
// worker threads (host_stream.h); events are completion flags with
// steady_clock timestamps (host_event.h); host-to-device copies optionally
// run through a simulated link of a fixed bandwidth (sim_link.h).
// Device memory is host-addressable: the CPU may read and write it directly.
#pragma once

#include <memory>

#include "runtime/device/device.h"

namespace layerstream::host {

// InvalidArgument for a negative or non-finite sim_link_gbps or negative host_threads.
Result<std::unique_ptr<Device>> open_host_device(const DeviceOptions& options);

}  // namespace layerstream::host

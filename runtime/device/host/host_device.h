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

// MemAvailable from /proc/meminfo (what can be allocated without swapping),
// falling back to free pages.
uint64_t available_ram();

// Page-aligned anonymous memory, zero-filled, on transparent huge pages where
// the kernel offers them (the CPU kernels stream weights through it, and the
// hardware prefetchers stop at every 4 KiB page boundary). The host backend's
// device and pinned memory; OutOfBudget naming the size when mmap fails.
Result<HostBuffer> alloc_pages(size_t bytes);

}  // namespace layerstream::host

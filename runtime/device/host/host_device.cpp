#include "runtime/device/host/host_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>

#include "fmt/format.h"
#include "layerstream/units.h"
#include "runtime/core/log.h"
#include "runtime/device/host/host_event.h"
#include "runtime/device/host/host_stream.h"
#include "runtime/device/host/sim_link.h"
#include "runtime/device/memory_ranges.h"

namespace layerstream::host {
namespace {

uint64_t page_size() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

uint64_t physical_ram() { return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * page_size(); }

std::string bytes_text(uint64_t b) { return fmt::format("{} ({} B)", format_bytes(b), b); }

// Page-aligned anonymous memory, zero-filled. Null on failure (errno set).
void* map_pages(uint64_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  // Transparent huge pages where the kernel offers them on request (the
  // usual "madvise" mode). Advice only: failure changes nothing but speed.
  (void)madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

uint64_t round_to_pages(uint64_t bytes) {
  const uint64_t page = page_size();
  return (bytes + page - 1) / page * page;
}

class HostDevice final : public Device {
 public:
  explicit HostDevice(const DeviceOptions& options)
      : link_(std::make_shared<SimLink>(options.sim_link_gbps)), ranges_(std::make_shared<MemoryRanges>()) {
    const int threads = options.host_threads > 0 ? options.host_threads
                                                 : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    info_.backend = BackendKind::kHost;
    info_.name = fmt::format("host ({} threads)", threads);
    info_.total_memory_bytes = physical_ram();
    info_.free_memory_bytes = available_ram();
    info_.copy_engines = 1;
    info_.host_addressable = !options.copies_only;
    copies_only_ = options.copies_only;
    info_.sim_link_gbps = options.sim_link_gbps;
  }

  const DeviceInfo& info() const override { return info_; }

  Result<std::unique_ptr<Arena>> create_arena(uint64_t budget_bytes) override {
    if (budget_bytes == 0) return Status::InvalidArgument("host arena: budget is 0 bytes");
    const uint64_t avail = available_ram();
    if (budget_bytes > avail) {
      return Status::OutOfBudget(fmt::format("host arena: budget {} does not fit in RAM: {} available of {} total",
                                             bytes_text(budget_bytes), bytes_text(avail),
                                             bytes_text(physical_ram())));
    }
    const uint64_t mapped = round_to_pages(budget_bytes);
    void* base = map_pages(mapped);
    if (base == nullptr) {
      return Status::OutOfBudget(fmt::format("host arena: mmap of {} failed: {}", bytes_text(mapped),
                                             Status::FromErrno("mmap", errno).message()));
    }
    ranges_->add(base, budget_bytes);
    auto release = [ranges = ranges_, mapped](void* p) {
      ranges->remove(p);
      munmap(p, mapped);
    };
    return std::make_unique<Arena>(base, budget_bytes, std::move(release));
  }

  Result<HostBuffer> alloc_pinned(size_t bytes) override {
    if (bytes == 0) return Status::InvalidArgument("alloc_pinned: 0 bytes");
    auto b = alloc_pages(bytes);
    if (!b.ok()) return b.status().WithContext("alloc_pinned");
    return b;
  }

  Result<HostBuffer> register_host(void* data, size_t bytes) override {
    if (data == nullptr || bytes == 0) {
      return Status::InvalidArgument(fmt::format("register_host: empty buffer ({}, {} B)", data, bytes));
    }
    // Plain RAM is already what the host backend copies from: nothing to pin.
    return HostBuffer(data, bytes, [](void*) {});
  }

  Result<std::unique_ptr<Stream>> create_stream(StreamRole role) override {
    return std::unique_ptr<Stream>(std::make_unique<HostStream>(role, link_, ranges_, !copies_only_));
  }

  Result<std::unique_ptr<Event>> create_event() override {
    return std::unique_ptr<Event>(std::make_unique<HostEvent>());
  }

 private:
  DeviceInfo info_;
  bool copies_only_ = false;
  std::shared_ptr<SimLink> link_;
  std::shared_ptr<MemoryRanges> ranges_;
};

}  // namespace

uint64_t available_ram() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return static_cast<uint64_t>(sysconf(_SC_AVPHYS_PAGES)) * page_size();
}

Result<HostBuffer> alloc_pages(size_t bytes) {
  const uint64_t mapped = round_to_pages(bytes);
  void* p = map_pages(mapped);
  if (p == nullptr)
    return Status::OutOfBudget(
        fmt::format("mmap of {} failed: {}", bytes_text(mapped), Status::FromErrno("mmap", errno).message()));
  return HostBuffer(p, bytes, [mapped](void* q) { munmap(q, mapped); });
}

Result<std::unique_ptr<Device>> open_host_device(const DeviceOptions& options) {
  if (!std::isfinite(options.sim_link_gbps) || options.sim_link_gbps < 0) {
    return Status::InvalidArgument(
        fmt::format("sim-link bandwidth must be a finite number >= 0 GB/s, got {}", options.sim_link_gbps));
  }
  if (options.host_threads < 0) {
    return Status::InvalidArgument(fmt::format("host threads must be >= 0, got {}", options.host_threads));
  }
  auto dev = std::make_unique<HostDevice>(options);
  LS_LOG_INFO("device: opened {}, {} RAM, sim-link {}{}", dev->info().name, format_bytes(dev->info().total_memory_bytes),
              options.sim_link_gbps > 0 ? fmt::format("{} GB/s", options.sim_link_gbps) : std::string("off"),
              options.copies_only ? ", device memory reached by copies only (staged path)" : "");
  return std::unique_ptr<Device>(std::move(dev));
}

}  // namespace layerstream::host

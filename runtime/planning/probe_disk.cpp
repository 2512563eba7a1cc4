// probe_box's disk step (box_probe_steps.h): the disk file read through each
// I/O path in the executor's pattern, its pages dropped from the page cache
// first (posix_fadvise DONTNEED) and the cached fraction checked (mincore).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "io/reader.h"
#include "layerstream/units.h"
#include "runtime/planning/box_probe_steps.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"

namespace layerstream::planning::probe_steps {
namespace {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuf = std::unique_ptr<uint8_t, AlignedFree>;

Result<AlignedBuf> aligned(size_t bytes) {
  // Buffers of 2 MiB and up are 2 MiB aligned and ask for huge pages, as the
  // host device's arena does (host_device.cpp): an O_DIRECT read pins its
  // destination page by page, and into 4 KiB pages it measured 0.8-1.6 GB/s
  // where the executor's reads into the arena ran at 1.7-2.5 GB/s.
  const size_t align = bytes >= (2u << 20) ? (2u << 20) : 4096;
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) return Status::OutOfBudget(fmt::format("probe: cannot allocate {} of host memory", format_bytes(bytes)));
  if (align > 4096) (void)::madvise(p, rounded, MADV_HUGEPAGE);  // advice only
  return AlignedBuf(static_cast<uint8_t*>(p));
}

// Drops [0, bytes) of the file from the page cache; returns the fraction still cached (mincore), -1 if unknown.
double drop_and_check_cache(const std::string& path, uint64_t bytes, bool* dropped) {
  *dropped = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ::fdatasync(fd);
  *dropped = ::posix_fadvise(fd, 0, static_cast<off_t>(bytes), POSIX_FADV_DONTNEED) == 0;
  double frac = -1;
  if (bytes > 0) {
    void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      const long page = ::sysconf(_SC_PAGESIZE);
      const size_t pages = (bytes + page - 1) / page;
      std::vector<unsigned char> vec(pages);
      if (::mincore(m, bytes, vec.data()) == 0) {
        size_t in = 0;
        for (unsigned char v : vec) in += v & 1;
        frac = static_cast<double>(in) / pages;
      }
      ::munmap(m, bytes);
    }
  }
  ::close(fd);
  return frac;
}

Status write_scratch(const std::string& path, uint64_t bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::FromErrno(fmt::format("probe: create scratch file {}", path), errno);
  std::vector<uint64_t> block((4 << 20) / 8);
  std::mt19937_64 rng(0x1234);
  for (uint64_t done = 0; done < bytes;) {
    for (auto& v : block) v = rng();
    const uint64_t n = std::min<uint64_t>(bytes - done, block.size() * 8);
    f.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n));
    if (!f) return Status::FromErrno(fmt::format("probe: write scratch file {} at {}", path, done), errno);
    done += n;
  }
  f.close();
  if (!f) return Status::IOError(fmt::format("probe: close scratch file {}", path));
  return Status::OK();
}

// Reads `req_bytes` requests of the file, `in_flight_max` outstanding, each in
// the reader's `reader_chunk` chunks (the pattern: ProbeOptions's disk_* fields).
DiskPoint probe_disk_path(const std::string& file, uint64_t file_bytes, io::IoPath path, const ProbeOptions& o,
                          uint64_t req_bytes, int in_flight_max, size_t reader_chunk) {
  DiskPoint p;
  p.path = std::string(name_of(path));
  io::ReaderOptions ro;
  ro.path = path;
  ro.queue_depth = std::max(16, in_flight_max);
  ro.chunk_bytes = reader_chunk;
  auto rd = io::open_reader(file, ro);
  if (!rd.ok()) {
    p.error = rd.status().message();
    return p;
  }
  io::Reader& r = **rd;
  p.description = r.description();
  p.direct = r.direct();
  const uint64_t align = std::max<uint64_t>(4096, r.alignment());
  const uint64_t region = std::min(file_bytes, o.disk_region_bytes) / align * align;
  if (region == 0) {
    p.error = fmt::format("file too small ({} B) to read aligned", file_bytes);
    return p;
  }
  p.cached_before = drop_and_check_cache(file, region, &p.cache_dropped);
  const uint64_t kReq = (req_bytes + align - 1) / align * align;
  const int kInFlight = in_flight_max;
  auto buf = aligned(kReq * kInFlight);
  if (!buf.ok()) {
    p.error = buf.status().message();
    return p;
  }
  uint64_t next = 0;
  int in_flight = 0;
  std::vector<io::ReadCompletion> done(kInFlight);
  std::vector<int> free_slots;
  for (int i = 0; i < kInFlight; ++i) free_slots.push_back(i);
  const auto t0 = Clock::now();
  Status err;
  while (err.ok()) {
    while (err.ok() && !free_slots.empty() && since(t0) < o.disk_seconds_per_path) {
      if (next >= region) {
        if (!o.disk_wrap) break;
        next = 0;
      }
      const int s = free_slots.back();
      free_slots.pop_back();
      io::ReadRequest q;
      q.offset = next;
      q.bytes = std::min(kReq, region - next);
      q.dst = buf->get() + s * kReq;
      q.tag = static_cast<uint64_t>(s);
      err = r.submit(q);
      if (!err.ok()) break;
      next += q.bytes;
      ++in_flight;
    }
    if (in_flight == 0 || !err.ok()) break;
    auto n = r.wait(done);
    if (!n.ok()) {
      err = n.status();
      break;
    }
    for (size_t i = 0; i < *n; ++i) {
      --in_flight;
      free_slots.push_back(static_cast<int>(done[i].tag));
      if (!done[i].status.ok() && err.ok()) err = done[i].status;
      p.bytes += done[i].bytes_read;
    }
  }
  p.seconds = since(t0);
  if (!err.ok()) {
    r.cancel();
    p.error = err.message();
    return p;
  }
  p.gbps = p.seconds > 0 ? p.bytes / p.seconds / 1e9 : 0;
  return p;
}

}  // namespace

Status probe_disk(const ProbeOptions& o, BoxProfile& out) {
  std::string file = o.disk_file;
  std::filesystem::path scratch;
  if (file.empty()) {
    std::error_code ec;
    std::filesystem::path dir = o.scratch_dir.empty() ? std::filesystem::temp_directory_path(ec)
                                                       : std::filesystem::path(o.scratch_dir);
    if (ec) return Status::IOError(fmt::format("probe: no temp directory: {}", ec.message()));
    scratch = dir / fmt::format("layerstream-probe-{}.bin", ::getpid());
    note(o, fmt::format("disk: writing scratch file {} ({})", scratch.string(), format_bytes(o.scratch_bytes)));
    LS_RETURN_IF_ERROR(write_scratch(scratch.string(), o.scratch_bytes));
    file = scratch.string();
    out.disk_scratch = true;
  }
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    int e = errno;
    if (!scratch.empty()) std::filesystem::remove(scratch);
    return Status::FromErrno(fmt::format("probe: --disk {}", file), e);
  }
  out.disk_file = file;
  out.disk_file_bytes = static_cast<uint64_t>(st.st_size);
  for (io::IoPath path : o.io_paths) {
    DiskPoint p = probe_disk_path(file, out.disk_file_bytes, path, o, o.disk_request_bytes,
                                  std::max(1, o.disk_requests_in_flight), o.disk_reader_chunk_bytes);
    if (p.error.empty())
      note(o, fmt::format("disk {}: {:.2f} GB/s ({} in {:.2f} s, {:.0f}% cached before)", p.path, p.gbps,
                          format_bytes(p.bytes), p.seconds, std::max(0.0, p.cached_before) * 100));
    else
      note(o, fmt::format("disk {}: not measured: {}", p.path, p.error));
    out.disk.push_back(std::move(p));
  }
  double best_direct = 0, best = 0;
  for (const DiskPoint& p : out.disk) {
    if (!p.error.empty()) continue;
    best = std::max(best, p.gbps);
    if (p.direct) best_direct = std::max(best_direct, p.gbps);
  }
  out.disk_gbps = best_direct > 0 ? best_direct : best;
  // The staged path's read size: one read per staging buffer, 16 in flight,
  // as the executor issues them (io_uring, O_DIRECT). The fastest chunk wins
  // (the smaller one on a tie within 3%).
  if (o.staging_sweep) {
    double best_gbps = 0;
    for (uint64_t chunk : {uint64_t{4} << 20, uint64_t{8} << 20, uint64_t{16} << 20}) {
      DiskPoint p = probe_disk_path(file, out.disk_file_bytes, io::IoPath::kUring, o, chunk, 16, chunk);
      if (!p.error.empty() || !p.direct) {
        note(o, fmt::format("staging chunk {}: not measured: {}", format_bytes(chunk),
                            p.error.empty() ? "no O_DIRECT" : p.error));
        continue;
      }
      note(o, fmt::format("staging chunk {} x 16 in flight: {:.2f} GB/s", format_bytes(chunk), p.gbps));
      out.staging_gbps_by_chunk.push_back({chunk, p.gbps});
      if (p.gbps > best_gbps * 1.03) {
        best_gbps = p.gbps;
        out.staging_chunk_bytes = chunk;
      }
    }
  }
  if (!scratch.empty()) {
    std::error_code ec;
    std::filesystem::remove(scratch, ec);
  }
  return Status::OK();
}

}  // namespace layerstream::planning::probe_steps

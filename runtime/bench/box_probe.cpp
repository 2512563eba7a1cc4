#include "runtime/bench/box_probe.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <atomic>

#include "kernels/kernels.h"
#include "kernels/math/convert_row.h"
#include "layerstream/units.h"
#include "runtime/core/log.h"

namespace layerstream::bench {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void note(const ProbeOptions& o, const std::string& s) {
  if (o.progress) o.progress(s);
}

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

// Repeats `batch` (which enqueues work on `stream`) until `seconds` of device
// time have been measured (at least once); returns (repetitions, seconds).
Result<std::pair<int, double>> time_on_stream(Device& dev, Stream& stream, double seconds,
                                              const std::function<Status()>& batch) {
  LS_ASSIGN_OR_RETURN(auto e0, dev.create_event());
  LS_ASSIGN_OR_RETURN(auto e1, dev.create_event());
  int reps = 0;
  double total = 0;
  while (reps == 0 || total < seconds) {
    LS_RETURN_IF_ERROR(stream.record(*e0));
    LS_RETURN_IF_ERROR(batch());
    LS_RETURN_IF_ERROR(stream.record(*e1));
    LS_RETURN_IF_ERROR(e1->synchronize());
    LS_ASSIGN_OR_RETURN(double ms, e1->elapsed_ms_since(*e0));
    total += std::max(0.0, ms) * 1e-3;
    ++reps;
    if (reps > 100000) break;
  }
  return std::pair<int, double>{reps, total};
}

Status probe_h2d(Device& dev, const ProbeOptions& o, BoxProfile& out) {
  uint64_t max_chunk = 0;
  for (uint64_t c : o.chunk_bytes) max_chunk = std::max(max_chunk, c);
  if (max_chunk == 0) return Status::OK();
  const uint64_t free_mem = dev.info().free_memory_bytes;
  if (free_mem > 0 && max_chunk > free_mem / 4) max_chunk = std::max<uint64_t>(4096, free_mem / 4 / 4096 * 4096);
  LS_ASSIGN_OR_RETURN(auto arena, dev.create_arena(max_chunk));
  LS_ASSIGN_OR_RETURN(ArenaRegion dst, arena->allocate("probe-h2d", max_chunk, 4096));
  LS_ASSIGN_OR_RETURN(HostBuffer pinned, dev.alloc_pinned(max_chunk));
  std::memset(pinned.data(), 0x5a, max_chunk);
  std::vector<uint8_t> pageable(max_chunk, 0xa5);
  LS_ASSIGN_OR_RETURN(auto stream, dev.create_stream(StreamRole::kCopy));
  for (const char* mem : {"pinned", "pageable"}) {
    const uint8_t* src = std::string_view(mem) == "pinned" ? static_cast<const uint8_t*>(pinned.data()) : pageable.data();
    for (uint64_t chunk : o.chunk_bytes) {
      if (chunk == 0 || chunk > max_chunk) continue;
      // One batch moves at least 16 MiB (or one chunk), so event overhead stays small.
      const uint64_t per_batch = std::max<uint64_t>(1, (16ull << 20) / chunk);
      auto r = time_on_stream(dev, *stream, o.seconds_per_point, [&]() -> Status {
        for (uint64_t k = 0; k < per_batch; ++k) {
          const uint64_t off = (k * chunk) % (max_chunk - chunk + 1) / 4096 * 4096;
          LS_RETURN_IF_ERROR(stream->copy_h2d(static_cast<uint8_t*>(dst.ptr) + off, src + off, chunk));
        }
        return Status::OK();
      });
      LS_RETURN_IF_ERROR(r.status());
      H2dPoint p;
      p.memory = mem;
      p.chunk_bytes = chunk;
      p.bytes = static_cast<uint64_t>(r->first) * per_batch * chunk;
      p.seconds = r->second;
      p.gbps = p.seconds > 0 ? p.bytes / p.seconds / 1e9 : 0;
      note(o, fmt::format("h2d {} {}: {:.2f} GB/s", mem, format_bytes(chunk), p.gbps));
      if (p.memory == "pinned") out.link_gbps = std::max(out.link_gbps, p.gbps);
      else out.pageable_link_gbps = std::max(out.pageable_link_gbps, p.gbps);
      out.h2d.push_back(p);
    }
  }
  return Status::OK();
}

// The matmul of a probe point over regions already filled.
kernels::MatmulParams matmul_params(const ArenaRegion& w, const ArenaRegion& x, const ArenaRegion& y,
                                    const ArenaRegion& scratch, uint64_t scratch_bytes, GgmlType type, int64_t n_out,
                                    int64_t n_in, int tokens) {
  kernels::MatmulParams p;
  p.w = w.ptr;
  p.w_type = type;
  p.n_out = n_out;
  p.n_in = n_in;
  p.x = static_cast<const float*>(x.ptr);
  p.n_tokens = tokens;
  p.y = static_cast<float*>(y.ptr);
  p.scratch = scratch.ptr;
  p.scratch_bytes = scratch.ptr ? scratch_bytes : 0;
  return p;
}

// Times `p` on `stream` for `seconds` after one warm-up run (pages touched,
// host pool awake) and describes it as a probe point.
Result<ComputePoint> time_matmul_point(Device& dev, kernels::Kernels& k, Stream& stream, const kernels::MatmulParams& p,
                                       uint64_t w_bytes, double seconds) {
  LS_RETURN_IF_ERROR(k.matmul(p, stream));
  LS_RETURN_IF_ERROR(stream.synchronize());
  LS_ASSIGN_OR_RETURN(auto r, time_on_stream(dev, stream, seconds, [&] { return k.matmul(p, stream); }));
  ComputePoint c;
  c.type = ggml_type_traits(p.w_type).name;
  c.shape = p.n_tokens == 1 ? "decode" : "prefill";
  c.n_out = p.n_out;
  c.n_in = p.n_in;
  c.n_tokens = p.n_tokens;
  c.weight_bytes = w_bytes;
  const double s = r.second / r.first;
  c.ms = s * 1e3;
  c.weight_gbps = s > 0 ? w_bytes / s / 1e9 : 0;
  c.gflops = s > 0 ? 2.0 * p.n_out * p.n_in * p.n_tokens / s / 1e9 : 0;
  return c;
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
  p.path = std::string(io::io_path_name(path));
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

Status probe_compute(Device& dev, const ProbeOptions& o, BoxProfile& out) {
  const BackendKind backend = dev.info().backend;
  kernels::KernelsOptions ko;
  ko.host_threads = o.device.host_threads;
  LS_ASSIGN_OR_RETURN(auto k, kernels::make_kernels(backend, ko));
  const int64_t n_out = o.matmul_n_out, n_in = o.matmul_n_in;
  if (n_out <= 0 || n_in <= 0 || n_in % 32 != 0)
    return Status::InvalidArgument(fmt::format("probe: matmul shape {} x {} (n_in must be a positive multiple of 32)",
                                               n_out, n_in));
  const int prefill = o.prefill_tokens > 0 ? o.prefill_tokens : (backend == BackendKind::kCuda ? 512 : 32);
  uint64_t max_w = 0, max_scratch = 0;
  for (GgmlType t : o.types) {
    max_w = std::max(max_w, ggml_row_bytes(ggml_type_traits(t), n_in) * n_out);
    max_scratch = std::max(max_scratch, k->matmul_scratch_bytes(t, n_out, n_in, prefill));
  }
  const uint64_t x_bytes = static_cast<uint64_t>(prefill) * n_in * 4, y_bytes = static_cast<uint64_t>(prefill) * n_out * 4;
  const uint64_t need = max_w + x_bytes + y_bytes + max_scratch + 4 * 4096;
  LS_ASSIGN_OR_RETURN(auto arena, dev.create_arena(need));
  LS_ASSIGN_OR_RETURN(ArenaRegion w, arena->allocate("probe-w", max_w, 4096));
  LS_ASSIGN_OR_RETURN(ArenaRegion x, arena->allocate("probe-x", x_bytes, 4096));
  LS_ASSIGN_OR_RETURN(ArenaRegion y, arena->allocate("probe-y", y_bytes, 4096));
  ArenaRegion scratch;
  if (max_scratch > 0) {
    LS_ASSIGN_OR_RETURN(scratch, arena->allocate("probe-scratch", max_scratch, 4096));
  }
  LS_ASSIGN_OR_RETURN(auto stream, dev.create_stream(StreamRole::kCompute));

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> xs(static_cast<size_t>(prefill) * n_in);
  for (float& v : xs) v = dist(rng);
  LS_RETURN_IF_ERROR(stream->copy_h2d(x.ptr, xs.data(), x_bytes));
  std::vector<float> row(n_in);
  for (GgmlType t : o.types) {
    const auto traits = ggml_type_traits(t);
    const uint64_t row_bytes = ggml_row_bytes(traits, n_in);
    const uint64_t w_bytes = row_bytes * n_out;
    std::vector<uint8_t> host(w_bytes);
    for (int64_t r = 0; r < n_out; ++r) {
      for (float& v : row) v = dist(rng);
      LS_RETURN_IF_ERROR(math::encode_row(t, row.data(), n_in, host.data() + r * row_bytes));
    }
    LS_RETURN_IF_ERROR(stream->copy_h2d(w.ptr, host.data(), w_bytes));
    LS_RETURN_IF_ERROR(stream->synchronize());
    for (int tokens : {1, prefill}) {
      const kernels::MatmulParams p = matmul_params(w, x, y, scratch, max_scratch, t, n_out, n_in, tokens);
      LS_ASSIGN_OR_RETURN(const ComputePoint c, time_matmul_point(dev, *k, *stream, p, w_bytes, o.seconds_per_point));
      note(o, fmt::format("matmul {} {} ({} tokens): {:.3f} ms, {:.2f} GB/s, {:.1f} GFLOP/s", c.type, c.shape, tokens,
                          c.ms, c.weight_gbps, c.gflops));
      out.compute.push_back(c);
    }
  }
  return Status::OK();
}

}  // namespace

std::string host_cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t c = line.find(':');
    if (c == std::string::npos) continue;
    const size_t b = line.find_first_not_of(" \t", c + 1);
    return b == std::string::npos ? std::string() : line.substr(b);
  }
  return {};
}

namespace {

// Runs fn(t) for t in [0, threads) on `threads` threads (the caller is t = 0).
void run_on_threads(int threads, const std::function<void(int)>& fn) {
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(fn, t);
  fn(0);
  for (auto& th : pool) th.join();
}

// RAM read bandwidth: `threads` threads each sum their stripe of one buffer
// (first touched by the same thread, so on a NUMA box each stripe is local);
// the best of repeated passes over about `seconds`. GB/s.
Result<double> measure_ram_read(uint64_t bytes, int threads, double seconds) {
  // Anonymous pages with transparent huge pages requested, as the host
  // device maps the memory weights live in (runtime/device/host): with 4 KiB
  // pages the hardware prefetchers stop at every page boundary and the rate
  // drops well below what the matmuls reach.
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return Status::FromErrno(fmt::format("probe: map {} for the RAM read", format_bytes(bytes)), errno);
  (void)::madvise(m, bytes, MADV_HUGEPAGE);  // advice only
  std::unique_ptr<void, std::function<void(void*)>> unmap(m, [bytes](void* q) { ::munmap(q, bytes); });
  const uint64_t words = bytes / 8;
  uint64_t* p = static_cast<uint64_t*>(m);
  auto stripe = [&](int t) { return std::pair<uint64_t, uint64_t>{words * t / threads, words * (t + 1) / threads}; };
  run_on_threads(threads, [&](int t) {
    auto [b, e] = stripe(t);
    for (uint64_t i = b; i < e; ++i) p[i] = i * 0x9e3779b97f4a7c15ull;
  });
  std::atomic<uint64_t> sink{0};
  double best = 0;
  const auto t0 = Clock::now();
  for (int rep = 0; rep < 3 || (since(t0) < seconds && rep < 1000); ++rep) {
    const auto s = Clock::now();
    run_on_threads(threads, [&](int t) {
      auto [b, e] = stripe(t);
      // Four independent sums in registers: the loop is bound by loads, not
      // by one add chain (the compiler may vectorise it further).
      const uint64_t* __restrict q = p;
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      uint64_t i = b;
      for (; i + 4 <= e; i += 4) {
        a0 += q[i];
        a1 += q[i + 1];
        a2 += q[i + 2];
        a3 += q[i + 3];
      }
      for (; i < e; ++i) a0 += q[i];
      sink.fetch_add(a0 + a1 + a2 + a3, std::memory_order_relaxed);
    });
    const double dt = since(s);
    if (dt > 0) best = std::max(best, static_cast<double>(words * 8) / dt / 1e9);
  }
  if (sink.load() == 42) LS_LOG_DEBUG("probe: ram read checksum {}", sink.load());  // keeps the reads
  return best;
}

// One CPU matmul timed on a host device: weights of `type` [n_out x n_in]
// made of 64 encoded random rows repeated (the time depends on the bytes
// read and the blocks decoded, not on their values; encoding every row of a
// 256 MiB K-quant matrix would take longer than timing it), `tokens` random
// activations.
Result<ComputePoint> time_host_matmul(Device& dev, kernels::Kernels& k, GgmlType type, int64_t n_out, int64_t n_in,
                                      int tokens, double seconds, std::mt19937& rng) {
  const auto traits = ggml_type_traits(type);
  const uint64_t row_bytes = ggml_row_bytes(traits, n_in);
  const uint64_t w_bytes = row_bytes * n_out;
  const uint64_t x_bytes = static_cast<uint64_t>(tokens) * n_in * 4, y_bytes = static_cast<uint64_t>(tokens) * n_out * 4;
  const uint64_t scratch_bytes = k.matmul_scratch_bytes(type, n_out, n_in, tokens);
  LS_ASSIGN_OR_RETURN(auto arena, dev.create_arena(w_bytes + x_bytes + y_bytes + scratch_bytes + 4 * 4096));
  LS_ASSIGN_OR_RETURN(ArenaRegion w, arena->allocate("probe-host-w", w_bytes, 4096));
  LS_ASSIGN_OR_RETURN(ArenaRegion x, arena->allocate("probe-host-x", x_bytes, 4096));
  LS_ASSIGN_OR_RETURN(ArenaRegion y, arena->allocate("probe-host-y", y_bytes, 4096));
  ArenaRegion scratch;
  if (scratch_bytes > 0) {
    LS_ASSIGN_OR_RETURN(scratch, arena->allocate("probe-host-scratch", scratch_bytes, 4096));
  }
  LS_ASSIGN_OR_RETURN(auto stream, dev.create_stream(StreamRole::kCompute));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t tile_rows = std::min<int64_t>(64, n_out);
  std::vector<uint8_t> tile(row_bytes * tile_rows);
  std::vector<float> row(n_in);
  for (int64_t r = 0; r < tile_rows; ++r) {
    for (float& v : row) v = dist(rng);
    LS_RETURN_IF_ERROR(math::encode_row(type, row.data(), n_in, tile.data() + r * row_bytes));
  }
  for (int64_t r = 0; r < n_out; r += tile_rows) {
    const int64_t n = std::min(tile_rows, n_out - r);
    LS_RETURN_IF_ERROR(stream->copy_h2d(static_cast<uint8_t*>(w.ptr) + r * row_bytes, tile.data(), n * row_bytes));
  }
  std::vector<float> xs(static_cast<size_t>(tokens) * n_in);
  for (float& v : xs) v = dist(rng);
  LS_RETURN_IF_ERROR(stream->copy_h2d(x.ptr, xs.data(), x_bytes));
  LS_RETURN_IF_ERROR(stream->synchronize());
  const kernels::MatmulParams p = matmul_params(w, x, y, scratch, scratch_bytes, type, n_out, n_in, tokens);
  return time_matmul_point(dev, k, *stream, p, w_bytes, seconds);
}

// The host site's figures: RAM read bandwidth, then per type a decode matvec
// over about host_decode_bytes of weights and a prefill GEMM, with the CPU
// kernels' fast path on a host device of its own (whatever o.device is).
Status probe_host(const ProbeOptions& o, const DeviceInfo& main_device, BoxProfile& out) {
  if (o.host_n_in <= 0 || o.host_n_in % 256 != 0 || o.host_prefill_n_out <= 0 || o.host_prefill_tokens < 2)
    return Status::InvalidArgument(fmt::format(
        "probe: host matmul shape n_in {} (a positive multiple of 256), prefill n_out {} and tokens {} (>= 2)",
        o.host_n_in, o.host_prefill_n_out, o.host_prefill_tokens));
  HostFigures h;
  h.cpu = host_cpu_name();
  h.threads = o.device.host_threads > 0 ? o.device.host_threads
                                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // RAM: the buffer is at most a quarter of the free memory (host RAM is the
  // device's memory on the host backend).
  uint64_t ram = o.ram_bytes;
  if (main_device.backend == BackendKind::kHost && main_device.free_memory_bytes > 0)
    ram = std::min(ram, main_device.free_memory_bytes / 4);
  ram = std::max<uint64_t>(ram / 4096 * 4096, 1 << 20);
  LS_ASSIGN_OR_RETURN(h.ram_read_gbps, measure_ram_read(ram, h.threads, std::max(0.5, 2 * o.seconds_per_point)));
  h.ram_read_bytes = ram;
  note(o, fmt::format("host RAM read ({} threads, {}): {:.2f} GB/s", h.threads, format_bytes(ram), h.ram_read_gbps));
  DeviceOptions hd;
  hd.backend = BackendKind::kHost;
  hd.host_threads = o.device.host_threads;
  LS_ASSIGN_OR_RETURN(auto dev, open_device(hd));
  kernels::KernelsOptions ko;
  ko.host_threads = o.device.host_threads;
  LS_ASSIGN_OR_RETURN(auto k, kernels::make_kernels(BackendKind::kHost, ko));
  std::mt19937 rng(7);
  for (GgmlType t : o.host_types) {
    const auto traits = ggml_type_traits(t);
    if (o.host_n_in % traits.block_elems != 0) {
      note(o, fmt::format("host matmul {}: skipped (n_in {} is not a multiple of its block size {})", traits.name,
                          o.host_n_in, traits.block_elems));
      continue;
    }
    const uint64_t row_bytes = ggml_row_bytes(traits, o.host_n_in);
    const int64_t decode_rows = std::max<int64_t>(256, static_cast<int64_t>(o.host_decode_bytes / row_bytes));
    for (auto [n_out, tokens] : {std::pair<int64_t, int>{decode_rows, 1}, {o.host_prefill_n_out, o.host_prefill_tokens}}) {
      LS_ASSIGN_OR_RETURN(ComputePoint c, time_host_matmul(*dev, *k, t, n_out, o.host_n_in, tokens, o.seconds_per_point, rng));
      note(o, fmt::format("host matmul {} {} ({} tokens, {} threads): {:.3f} ms, {:.2f} GB/s, {:.1f} GMAC/s", c.type,
                          c.shape, tokens, h.threads, c.ms, c.weight_gbps, c.gmacs()));
      h.compute.push_back(c);
    }
  }
  out.host = std::move(h);
  return Status::OK();
}

}  // namespace

Result<BoxProfile> probe_box(const ProbeOptions& o) {
  LS_ASSIGN_OR_RETURN(auto dev, open_device(o.device));
  const DeviceInfo& info = dev->info();
  BoxProfile out;
  out.backend = std::string(backend_name(info.backend));
  out.device = info.name;
  out.total_memory_bytes = info.total_memory_bytes;
  out.free_memory_bytes = info.free_memory_bytes;
  out.copy_engines = info.copy_engines;
  out.sim_link_gbps = info.sim_link_gbps;
  if (o.h2d) LS_RETURN_IF_ERROR(probe_h2d(*dev, o, out));
  if (o.disk && !o.io_paths.empty()) LS_RETURN_IF_ERROR(probe_disk(o, out));
  if (o.compute && !o.types.empty()) LS_RETURN_IF_ERROR(probe_compute(*dev, o, out));
  if (o.host) LS_RETURN_IF_ERROR(probe_host(o, info, out));
  return out;
}

nlohmann::json to_json(const BoxProfile& b) {
  using nlohmann::json;
  json h2d = json::array();
  for (const H2dPoint& p : b.h2d)
    h2d.push_back({{"memory", p.memory}, {"chunk_bytes", p.chunk_bytes}, {"bytes", p.bytes}, {"seconds", p.seconds},
                   {"gbps", p.gbps}});
  json disk = json::array();
  json by_path = json::object();
  for (const DiskPoint& p : b.disk) {
    json j = {{"path", p.path}, {"description", p.description}, {"direct", p.direct}, {"bytes", p.bytes},
              {"seconds", p.seconds}, {"gbps", p.gbps}, {"cache_dropped", p.cache_dropped}};
    j["cached_before"] = p.cached_before >= 0 ? json(p.cached_before) : json(nullptr);
    if (!p.error.empty()) j["error"] = p.error;
    else by_path[p.path] = p.gbps;
    disk.push_back(std::move(j));
  }
  json staging = json::array();
  for (const auto& [chunk, gbps] : b.staging_gbps_by_chunk) staging.push_back({{"chunk_bytes", chunk}, {"gbps", gbps}});
  auto points = [](const std::vector<ComputePoint>& v) {
    json a = json::array();
    for (const ComputePoint& c : v)
      a.push_back({{"type", c.type}, {"shape", c.shape}, {"n_out", c.n_out}, {"n_in", c.n_in},
                   {"n_tokens", c.n_tokens}, {"weight_bytes", c.weight_bytes}, {"ms", c.ms},
                   {"weight_gbps", c.weight_gbps}, {"gflops", c.gflops}, {"gmacs", c.gmacs()}});
    return a;
  };
  json compute = points(b.compute);
  json host = nullptr;
  if (b.host)
    host = {{"cpu", b.host->cpu},
            {"threads", b.host->threads},
            {"ram_read_bytes", b.host->ram_read_bytes},
            {"ram_read_gbps", b.host->ram_read_gbps},
            {"compute", points(b.host->compute)}};
  json doc = {{"probe_version", 2},
          {"box",
           {{"backend", b.backend},
            {"device", b.device},
            {"total_memory_bytes", b.total_memory_bytes},
            {"free_memory_bytes", b.free_memory_bytes},
            {"copy_engines", b.copy_engines},
            {"sim_link_gbps", b.sim_link_gbps}}},
          {"link_gbps", b.link_gbps},
          {"pageable_link_gbps", b.pageable_link_gbps},
          {"disk_gbps", b.disk_gbps},
          {"disk_gbps_by_path", by_path},
          {"staging_chunk_bytes", b.staging_chunk_bytes},
          {"staging_gbps_by_chunk", staging},
          {"h2d", h2d},
          {"disk", {{"file", b.disk_file}, {"file_bytes", b.disk_file_bytes}, {"scratch", b.disk_scratch},
                    {"points", disk}}},
          {"compute", compute}};
  if (b.host) doc["host"] = std::move(host);
  return doc;
}

std::string format_probe_table(const BoxProfile& b) {
  std::string o;
  o += fmt::format("device: {} ({} backend), memory {} total, {} free, {} copy engine(s){}\n", b.device, b.backend,
                   format_bytes(b.total_memory_bytes), format_bytes(b.free_memory_bytes), b.copy_engines,
                   b.sim_link_gbps > 0 ? fmt::format(", sim link {:.2f} GB/s", b.sim_link_gbps) : "");
  if (!b.h2d.empty()) {
    o += "\nhost -> device    chunk        GB/s\n";
    for (const H2dPoint& p : b.h2d)
      o += fmt::format("  {:<12} {:>10} {:>11.2f}\n", p.memory, format_bytes(p.chunk_bytes), p.gbps);
  }
  if (!b.disk.empty()) {
    o += fmt::format("\ndisk: {} ({}{})\n", b.disk_file, format_bytes(b.disk_file_bytes),
                     b.disk_scratch ? ", scratch file written by the probe" : "");
    o += "  path       GB/s        read   seconds  cache before  description\n";
    for (const DiskPoint& p : b.disk) {
      if (!p.error.empty()) {
        o += fmt::format("  {:<9} not measured: {}\n", p.path, p.error);
        continue;
      }
      std::string cache = p.cached_before < 0 ? "unknown" : fmt::format("{:.0f}%", p.cached_before * 100);
      if (p.cache_dropped) cache += " (dropped)";
      o += fmt::format("  {:<9} {:>6.2f} {:>11} {:>9.2f}  {:<13} {}\n", p.path, p.gbps, format_bytes(p.bytes),
                       p.seconds, cache, p.description);
    }
  }
  if (!b.compute.empty()) {
    o += "\nmatmul   shape     tokens   n_out x n_in        ms   weight GB/s   GFLOP/s\n";
    for (const ComputePoint& c : b.compute)
      o += fmt::format("  {:<6} {:<8} {:>6}   {:>5} x {:<5} {:>10.3f} {:>13.2f} {:>9.1f}\n", c.type, c.shape,
                       c.n_tokens, c.n_out, c.n_in, c.ms, c.weight_gbps, c.gflops);
  }
  if (b.host) {
    o += fmt::format("\nhost site: {} threads{}, RAM read {:.2f} GB/s ({})\n", b.host->threads,
                     b.host->cpu.empty() ? "" : ", " + b.host->cpu, b.host->ram_read_gbps,
                     format_bytes(b.host->ram_read_bytes));
    o += "  matmul shape     tokens    n_out x n_in        ms   weight GB/s    GMAC/s\n";
    for (const ComputePoint& c : b.host->compute)
      o += fmt::format("  {:<6} {:<8} {:>6}   {:>6} x {:<5} {:>10.3f} {:>13.2f} {:>9.1f}\n", c.type, c.shape,
                       c.n_tokens, c.n_out, c.n_in, c.ms, c.weight_gbps, c.gmacs());
  }
  o += fmt::format("\nplanner prior: link {:.2f} GB/s (best pinned H2D), disk {:.2f} GB/s (best O_DIRECT read)\n",
                   b.link_gbps, b.disk_gbps);
  return o;
}

Result<BoxPrior> box_prior_from_json(const nlohmann::json& doc, const std::string& source, io::IoPath io_path) {
  auto rate = [&](const nlohmann::json& j, const char* key) -> Result<double> {
    if (!j.is_object() || !j.contains(key)) return Status::Corruption(fmt::format("{}: no \"{}\" field", source, key));
    const auto& v = j.at(key);
    if (!v.is_number() || !(v.get<double>() >= 0))
      return Status::Corruption(fmt::format("{}: \"{}\" is not a non-negative number: {}", source, key, v.dump()));
    return v.get<double>();
  };
  if (!doc.is_object() || !doc.contains("probe_version"))
    return Status::Corruption(fmt::format("{}: not a `layerstream probe --json` result (no probe_version)", source));
  BoxPrior p;
  p.source = source;
  LS_ASSIGN_OR_RETURN(p.link_gbps, rate(doc, "link_gbps"));
  LS_ASSIGN_OR_RETURN(p.disk_gbps, rate(doc, "disk_gbps"));
  if (io_path != io::IoPath::kAuto && doc.contains("disk_gbps_by_path")) {
    const std::string name(io::io_path_name(io_path));
    const auto& by = doc.at("disk_gbps_by_path");
    if (by.is_object() && by.contains(name)) {
      LS_ASSIGN_OR_RETURN(p.disk_gbps, rate(by, name.c_str()));
    }
  }
  if (doc.contains("staging_chunk_bytes")) {
    const auto& v = doc.at("staging_chunk_bytes");
    if (!v.is_number_unsigned())
      return Status::Corruption(fmt::format("{}: \"staging_chunk_bytes\" is not a byte count: {}", source, v.dump()));
    p.staging_chunk_bytes = v.get<uint64_t>();
    if (p.staging_chunk_bytes != 0 && (p.staging_chunk_bytes < 4096 || p.staging_chunk_bytes > (1ull << 30)))
      return Status::Corruption(fmt::format("{}: staging_chunk_bytes {} is outside [4 KiB, 1 GiB]", source,
                                            p.staging_chunk_bytes));
  }
  if (p.link_gbps <= 0) return Status::Corruption(fmt::format("{}: link_gbps is 0 (H2D was not measured)", source));
  return p;
}

Result<BoxPrior> load_box_prior(const std::string& path, io::IoPath io_path) {
  std::ifstream f(path);
  if (!f) return Status::FromErrno(fmt::format("open box file {}", path), errno);
  nlohmann::json doc = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::Corruption(fmt::format("box file {}: not valid JSON", path));
  return box_prior_from_json(doc, "box file " + path, io_path);
}

}  // namespace layerstream::bench

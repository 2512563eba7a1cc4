// Sequential read of one large file with each I/O path (io_uring O_DIRECT,
// pread pool O_DIRECT, buffered pread, mmap) at several chunk sizes and
// queue depths. Reports bytes_per_second (GB/s) and cpu_s_per_GiB (user+sys
// CPU seconds of this process per GiB read).
//
// The file: --file=PATH or $LAYERSTREAM_BENCH_IO_FILE (default
// $TMPDIR/layerstream-io-bench.bin), created with --bytes=N or
// $LAYERSTREAM_BENCH_IO_BYTES (default 64 MiB) when missing or of another size.
// Page cache: before every iteration the file's cached pages are dropped with
// posix_fadvise(POSIX_FADV_DONTNEED) (the counter page_cache_dropped says
// whether that worked), so buffered and mmap reads hit the disk too.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "io/reader.h"
#include "io/staging_ring.h"
#include "layerstream/units.h"

namespace {

using namespace layerstream;  // NOLINT: benchmark program, not a header
using layerstream::io::IoPath;

std::string g_file;
uint64_t g_bytes = uint64_t{64} << 20;

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

bool drop_file_cache() {
  int fd = ::open(g_file.c_str(), O_RDONLY);
  if (fd < 0) return false;
  ::fdatasync(fd);
  bool ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

bool ensure_file() {
  struct stat st {};
  if (::stat(g_file.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == g_bytes) return true;
  std::fprintf(stderr, "creating %s (%s)\n", g_file.c_str(), format_bytes(g_bytes).c_str());
  FILE* f = std::fopen(g_file.c_str(), "wb");
  if (!f) return false;
  std::vector<uint64_t> block((size_t{4} << 20) / 8);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (uint64_t done = 0; done < g_bytes;) {
    for (auto& v : block) {  // xorshift: incompressible, never all zeros
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = x;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(block.size() * 8, g_bytes - done));
    if (std::fwrite(block.data(), 1, n, f) != n) return std::fclose(f), false;
    done += n;
  }
  std::fflush(f);
  ::fsync(fileno(f));
  return std::fclose(f) == 0;
}

void set_counters(benchmark::State& state, double cpu, uint64_t bytes, bool dropped) {
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["cpu_s_per_GiB"] = cpu / (static_cast<double>(bytes) / (1 << 30));
  state.counters["page_cache_dropped"] = dropped ? 1 : 0;
}

// Reads the whole file with `qd` requests of `chunk` bytes outstanding, each
// into its own staging-ring buffer (registered with the reader), as the
// streaming copy thread does.
void BM_Reader(benchmark::State& state, IoPath path) {
  const size_t chunk = static_cast<size_t>(state.range(0)) << 10;
  const unsigned qd = static_cast<unsigned>(state.range(1));
  io::ReaderOptions o;
  o.path = path;
  o.queue_depth = qd;
  o.chunk_bytes = chunk;
  auto reader = io::open_reader(g_file, o);
  if (!reader.ok()) return state.SkipWithError(reader.status().ToString().c_str());
  auto ring = io::StagingRing::create({chunk, qd, {}});
  if (!ring.ok()) return state.SkipWithError(ring.status().ToString().c_str());
  if (Status s = (*reader)->register_buffers((*ring)->iovecs()); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  state.SetLabel((*reader)->description());
  const uint64_t size = (*reader)->file_size();
  std::vector<io::ReadCompletion> done(qd);
  double cpu = 0;
  uint64_t total = 0;
  bool dropped = true;
  for (auto _ : state) {
    state.PauseTiming();
    dropped = drop_file_cache() && dropped;
    state.ResumeTiming();
    double c0 = cpu_seconds();
    uint64_t next = 0;
    unsigned outstanding = 0;
    for (unsigned b = 0; b < qd && next < size; ++b, next += chunk, ++outstanding) {
      if (Status s = (*reader)->submit({next, chunk, (*ring)->iovecs()[b].iov_base, b}); !s.ok()) {
        return state.SkipWithError(s.ToString().c_str());
      }
    }
    while (outstanding > 0) {
      auto n = (*reader)->wait(done);
      if (!n.ok()) return state.SkipWithError(n.status().ToString().c_str());
      for (size_t i = 0; i < *n; ++i) {
        if (!done[i].status.ok()) return state.SkipWithError(done[i].status.ToString().c_str());
        --outstanding;
        if (next < size) {
          auto b = static_cast<unsigned>(done[i].tag);
          if (Status s = (*reader)->submit({next, chunk, (*ring)->iovecs()[b].iov_base, b}); !s.ok()) {
            return state.SkipWithError(s.ToString().c_str());
          }
          next += chunk;
          ++outstanding;
        }
      }
    }
    cpu += cpu_seconds() - c0;
    total += size;
  }
  set_counters(state, cpu, total, dropped);
}

// mmap the file and copy it out chunk by chunk (the copy stands in for the
// H2D copy that would drain a staging buffer).
void BM_Mmap(benchmark::State& state) {
  const size_t chunk = static_cast<size_t>(state.range(0)) << 10;
  int fd = ::open(g_file.c_str(), O_RDONLY);
  if (fd < 0) return state.SkipWithError("open failed");
  std::vector<uint8_t> dst(chunk);
  double cpu = 0;
  uint64_t total = 0;
  bool dropped = true;
  state.SetLabel("mmap + memcpy");
  for (auto _ : state) {
    state.PauseTiming();
    dropped = drop_file_cache() && dropped;
    state.ResumeTiming();
    double c0 = cpu_seconds();
    void* p = ::mmap(nullptr, g_bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return state.SkipWithError("mmap failed"), void(::close(fd));
    ::madvise(p, g_bytes, MADV_SEQUENTIAL);
    for (uint64_t off = 0; off < g_bytes; off += chunk) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, g_bytes - off));
      std::memcpy(dst.data(), static_cast<uint8_t*>(p) + off, n);
      benchmark::DoNotOptimize(dst.data());
    }
    ::munmap(p, g_bytes);
    cpu += cpu_seconds() - c0;
    total += g_bytes;
  }
  ::close(fd);
  set_counters(state, cpu, total, dropped);
}

void register_all() {
  const std::vector<int64_t> chunks_kib = {256, 1024, 4096};
  const std::vector<int64_t> depths = {4, 16, 32};
  for (auto [name, path] : std::vector<std::pair<const char*, IoPath>>{
           {"uring", IoPath::kUring}, {"pread", IoPath::kPread}, {"buffered", IoPath::kBuffered}}) {
    auto* b = benchmark::RegisterBenchmark((std::string("read/") + name).c_str(), BM_Reader, path);
    b->ArgNames({"chunk_kib", "qd"})->UseRealTime()->Unit(benchmark::kMillisecond);
    for (int64_t c : chunks_kib) {
      for (int64_t d : depths) b->Args({c, d});
    }
  }
  auto* m = benchmark::RegisterBenchmark("read/mmap", BM_Mmap);
  m->ArgNames({"chunk_kib"})->UseRealTime()->Unit(benchmark::kMillisecond);
  for (int64_t c : chunks_kib) m->Args({c});
}

}  // namespace

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TMPDIR");
  g_file = std::string(tmp && *tmp ? tmp : "/tmp") + "/layerstream-io-bench.bin";
  if (const char* f = std::getenv("LAYERSTREAM_BENCH_IO_FILE")) g_file = f;
  if (const char* b = std::getenv("LAYERSTREAM_BENCH_IO_BYTES")) {
    auto v = parse_size(b);
    if (!v.ok()) return std::fprintf(stderr, "%s\n", v.status().ToString().c_str()), 2;
    g_bytes = *v;
  }
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--file=", 0) == 0) {
      g_file = a.substr(7);
    } else if (a.rfind("--bytes=", 0) == 0) {
      auto v = parse_size(a.substr(8));
      if (!v.ok()) return std::fprintf(stderr, "%s\n", v.status().ToString().c_str()), 2;
      g_bytes = *v;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (g_bytes == 0) return std::fprintf(stderr, "--bytes must be > 0\n"), 2;
  if (!ensure_file()) return std::fprintf(stderr, "cannot create %s\n", g_file.c_str()), 1;
  int n = static_cast<int>(rest.size());
  register_all();
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

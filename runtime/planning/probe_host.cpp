// probe_box's host-site step (box_probe_steps.h): RAM read bandwidth with
// every compute thread, and the CPU kernels' fast-path matmul rates on a host
// device of its own, whatever the probed device is.
#include <sys/mman.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernels/math/convert_row.h"
#include "layerstream/units.h"
#include "runtime/planning/box_probe_steps.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"

namespace layerstream::planning::probe_steps {
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
  LS_ASSIGN_OR_RETURN(MatmulArena regions, matmul_arena(dev, "probe-host", w_bytes, x_bytes, y_bytes, scratch_bytes));
  const ArenaRegion &w = regions.w, &x = regions.x, &y = regions.y, &scratch = regions.scratch;
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

}  // namespace

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

}  // namespace layerstream::planning::probe_steps

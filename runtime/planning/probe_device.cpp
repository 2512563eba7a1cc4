// probe_box's device steps (box_probe_steps.h): the H2D link at each chunk
// size from pinned and pageable memory, and matmul rates per weight type,
// timed by device events.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "kernels/math/convert_row.h"
#include "layerstream/units.h"
#include "runtime/planning/box_probe_steps.h"
#include "runtime/core/status_macros.h"

namespace layerstream::planning::probe_steps {

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

Result<MatmulArena> matmul_arena(Device& dev, const std::string& name, uint64_t w_bytes, uint64_t x_bytes,
                                 uint64_t y_bytes, uint64_t scratch_bytes) {
  MatmulArena m;
  LS_ASSIGN_OR_RETURN(m.arena, dev.create_arena(w_bytes + x_bytes + y_bytes + scratch_bytes + 4 * 4096));
  LS_ASSIGN_OR_RETURN(m.w, m.arena->allocate(name + "-w", w_bytes, 4096));
  LS_ASSIGN_OR_RETURN(m.x, m.arena->allocate(name + "-x", x_bytes, 4096));
  LS_ASSIGN_OR_RETURN(m.y, m.arena->allocate(name + "-y", y_bytes, 4096));
  if (scratch_bytes > 0) {
    LS_ASSIGN_OR_RETURN(m.scratch, m.arena->allocate(name + "-scratch", scratch_bytes, 4096));
  }
  return m;
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
  LS_ASSIGN_OR_RETURN(MatmulArena regions, matmul_arena(dev, "probe", max_w, x_bytes, y_bytes, max_scratch));
  const ArenaRegion &w = regions.w, &x = regions.x, &y = regions.y, &scratch = regions.scratch;
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

}  // namespace layerstream::planning::probe_steps

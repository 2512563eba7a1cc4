#include "runtime/planning/block_probe.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "io/reader.h"
#include "runtime/planning/stats.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/model/gguf_file.h"

namespace layerstream::planning {
namespace {

using Clock = std::chrono::steady_clock;

// Tensors below this size outside the probed spans are copied too (norms,
// RoPE factors): zeros there would turn activations into NaN or 0.
constexpr uint64_t kSmallTensorBytes = 1 << 20;

// An anonymous private mapping of `bytes` (zero pages until written).
struct Mapping {
  uint8_t* ptr = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (ptr) ::munmap(ptr, bytes);
  }
};

Status map_zeros(Mapping& m, uint64_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return Status::FromErrno("block probe: mapping " + std::to_string(bytes) + " bytes", errno);
  // Huge pages where the probed spans are written, as the host arena the
  // real weights live in has (host_device.cpp): with 4 KiB pages the TLB
  // misses alone made a probed block 10-20% slower than in a real pass.
  (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advice only
  m.ptr = static_cast<uint8_t*>(p);
  m.bytes = bytes;
  return Status::OK();
}

// The probed block's and the head's spans and the small tensors, from the
// file, each to its own offset of `base`; read through an io::Reader with the
// runner's reader options (its fault-injection hooks included).
Status fill_probed_bytes(const std::string& path, const io::ReaderOptions& reader, const llama::RunnerFootprint& fp,
                         int block, int head, uint8_t* base) {
  LS_ASSIGN_OR_RETURN(GgufFile file, read_gguf_file(path));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<io::Reader> rd, io::open_reader(path, reader));
  for (int l : {block, head}) {
    const sched::LayerSpec& spec = fp.layers[l];
    LS_RETURN_IF_ERROR(rd->read_span(spec.file_offset, spec.bytes, base + spec.file_offset));
  }
  for (const GgufTensorInfo& t : file.tensors())
    if (t.n_bytes < kSmallTensorBytes) LS_RETURN_IF_ERROR(rd->read_span(t.offset, t.n_bytes, base + t.offset));
  return Status::OK();
}

// What a real pass reads between two runs of one layer: the other layers'
// weights. Here those compute over the zero page (always cached), so before
// the probed block and the head the stream reads through a buffer of that
// size (at most twice the last-level cache, which is what it takes to evict
// the probed bytes): their weights come from memory, as in a pass.
class Evictor {
 public:
  explicit Evictor(uint64_t bytes) : buf_(bytes / 8 + 1, 1) {}
  Status run() const {
    uint64_t sum = 0;
    for (uint64_t w : buf_) sum += w;
    sink_ = sum;
    return Status::OK();
  }
  static uint64_t size_for(uint64_t other_weight_bytes) {
    const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
    const uint64_t cap = l3 > 0 ? std::max<uint64_t>(2 * static_cast<uint64_t>(l3), 64ull << 20) : 1ull << 30;
    return std::min(other_weight_bytes, cap);
  }

 private:
  std::vector<uint64_t> buf_;
  mutable std::atomic<uint64_t> sink_{0};
};

// A memcpy loop on its own thread (what the host backend's copy stream does
// for a RAM-tier layer), in chunks of the executor's copy size.
class CopyLoop {
 public:
  explicit CopyLoop(uint64_t bytes) : src_(bytes, 1), dst_(bytes, 0) {}
  ~CopyLoop() { stop(); }
  void start() {
    copied_ = 0;
    stop_ = false;
    t0_ = Clock::now();
    th_ = std::thread([this] {
      constexpr uint64_t kChunk = 8 << 20;
      uint64_t off = 0, n = 0;
      do {  // at least one chunk, however short the window
        const uint64_t len = std::min<uint64_t>(kChunk, src_.size() - off);
        std::memcpy(dst_.data() + off, src_.data() + off, len);
        n += len;
        off = off + len >= src_.size() ? 0 : off + len;
      } while (!stop_.load(std::memory_order_relaxed));
      copied_ = n;
    });
  }
  // Stops the loop; its rate over the time it ran (bytes/s).
  double stop() {
    if (!th_.joinable()) return 0;
    stop_ = true;
    th_.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0_).count();
    return s > 0 ? copied_ / s : 0;
  }

 private:
  std::vector<uint8_t> src_, dst_;
  std::thread th_;
  std::atomic<bool> stop_{false};
  uint64_t copied_ = 0;
  Clock::time_point t0_;
};

// Medians over `passes` decode passes (after one warm-up) of the block's and
// the head's compute.
Status time_decode(llama::LlamaRunner& r, const BlockProbeOptions& o, int block, int head, double& block_s,
                   double& head_s) {
  const int batch = r.n_seq();
  LS_RETURN_IF_ERROR(r.bench_decode(batch, o.decode_position));
  std::vector<double> b, h;
  for (int p = 0; p < std::max(1, o.decode_passes); ++p) {
    LS_RETURN_IF_ERROR(r.bench_decode(batch, o.decode_position));
    const auto& c = r.executor().last_pass().compute_s;
    b.push_back(c.at(block));
    h.push_back(c.at(head));
  }
  block_s = summarize(b).median;
  head_s = summarize(h).median;
  return Status::OK();
}

// Copy rate alone and beside the block's decode; the compute a copied byte
// costs. Rounds of (copy alone, decode beside a copy, decode alone),
// interleaved so a busy machine's swings fall on both sides; medians.
Status measure_contention(llama::LlamaRunner& r, const BlockProbeOptions& o, int block, int head, BlockTimes& t) {
  constexpr int kRounds = 3;
  BlockProbeOptions few = o;
  few.decode_passes = std::max(2, o.decode_passes / 2);
  CopyLoop loop(o.copy_buffer_bytes);
  std::vector<double> alone_gbps, beside_gbps, beside_s, quiet_s;
  for (int round = 0; round < kRounds; ++round) {
    loop.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    alone_gbps.push_back(loop.stop() / 1e9);
    double b = 0, h = 0;
    loop.start();
    Status st = time_decode(r, few, block, head, b, h);
    beside_gbps.push_back(loop.stop() / 1e9);
    LS_RETURN_IF_ERROR(st);
    beside_s.push_back(b);
    LS_RETURN_IF_ERROR(time_decode(r, few, block, head, b, h));
    quiet_s.push_back(b);
  }
  t.copy_gbps_alone = summarize(alone_gbps).median;
  t.copy_gbps_contended = summarize(beside_gbps).median;
  t.block_decode_contended_s = summarize(beside_s).median;
  const double quiet = summarize(quiet_s).median;
  // During a contended block of time t', the copy moved rate' x t' bytes and
  // the block lost t' - t: per byte, (t' - t) / (rate' x t').
  const double tc = t.block_decode_contended_s, rate = t.copy_gbps_contended * 1e9;
  if (tc > quiet && rate > 0) t.compute_s_per_copied_byte = (tc - quiet) / (rate * tc);
  return Status::OK();
}

}  // namespace

Result<BlockTimes> probe_block(const BlockProbeOptions& o) {
  llama::RunnerOptions ro = o.runner;
  ro.strategy = llama::Strategy::kResident;
  ro.pins.clear();
  ro.plan.reset();
  ro.trace = false;
  ro.host_compute_factor = 0;
  ro.prefill_chunk = std::max(ro.prefill_chunk, o.prefill_tokens);
  LS_ASSIGN_OR_RETURN(llama::RunnerFootprint fp, llama::LlamaRunner::footprint(o.path, ro, BackendKind::kHost));
  const int n = static_cast<int>(fp.layers.size());
  if (n < 2) return Status::InvalidArgument(o.path + ": no block to probe");
  if (o.decode_position < 0 || o.decode_position >= fp.n_ctx)
    return Status::InvalidArgument("block probe: decode position " + std::to_string(o.decode_position) +
                                   " outside the context [0, " + std::to_string(fp.n_ctx) + ")");
  BlockTimes t;
  t.head_layer = n - 1;           // the runner's layers: blocks in order, then the head
  t.block_layer = (n - 1) / 2;    // a middle block
  t.batch = fp.n_seq;

  LS_ASSIGN_OR_RETURN(std::unique_ptr<Device> dev, open_device(o.device));
  if (dev->info().backend != BackendKind::kHost)
    return Status::Unsupported("block probe: runs on the host backend only (the weights are host memory)");
  uint64_t file_bytes = 0;
  for (const sched::LayerSpec& l : fp.layers) file_bytes = std::max(file_bytes, l.file_offset + l.bytes);
  {
    LS_ASSIGN_OR_RETURN(GgufFile f, read_gguf_file(o.path));
    file_bytes = std::max(file_bytes, f.file_size());
  }
  Mapping weights;
  LS_RETURN_IF_ERROR(map_zeros(weights, file_bytes));
  LS_RETURN_IF_ERROR(fill_probed_bytes(o.path, o.runner.reader, fp, t.block_layer, t.head_layer, weights.ptr));
  uint64_t other_bytes = 0;
  for (int l = 0; l < n; ++l)
    if (l != t.block_layer && l != t.head_layer) other_bytes += fp.layers[l].bytes;
  Evictor evict(Evictor::size_for(other_bytes));
  // Before the layer ahead of each probed one (its time is not used), so the
  // eviction is not inside the probed layer's compute interval.
  const int before_block = t.block_layer - 1, before_head = t.head_layer - 1;
  ro.external_weights = llama::RunnerOptions::ExternalWeights{
      weights.ptr, [&evict, before_block, before_head](int layer, Stream& s) -> Status {
        if (layer != before_block && layer != before_head) return Status::OK();
        return s.host_func([&evict] { return evict.run(); });
      }};
  // The arena: the reserve plus a placeholder per layer (all the executor holds).
  ro.vram_budget = fp.reserve.total() + static_cast<uint64_t>(n) * sched::kSlotAlignment + (1ull << 20);
  LS_ASSIGN_OR_RETURN(auto runner, llama::LlamaRunner::create(*dev, o.path, ro));

  LS_RETURN_IF_ERROR(time_decode(*runner, o, t.block_layer, t.head_layer, t.block_decode_s, t.head_decode_s));
  if (o.contention) LS_RETURN_IF_ERROR(measure_contention(*runner, o, t.block_layer, t.head_layer, t));
  if (o.prefill_tokens > 0) {
    const int tokens = std::min(o.prefill_tokens, std::min(runner->max_pass_tokens(), runner->n_ctx()));
    LS_RETURN_IF_ERROR(runner->bench_prefill(tokens));
    const auto& c = runner->executor().last_pass().compute_s;
    t.prefill_tokens = tokens;
    t.block_prefill_s = c.at(t.block_layer);
    t.head_prefill_s = c.at(t.head_layer);
  }
  LS_LOG_INFO("plan: block {} decode {:.2f} ms at position {}, head {:.2f} ms; copy {:.1f} GB/s alone, {:.1f} GB/s "
              "beside compute (block {:.2f} ms)",
              t.block_layer, t.block_decode_s * 1e3, o.decode_position, t.head_decode_s * 1e3, t.copy_gbps_alone,
              t.copy_gbps_contended, t.block_decode_contended_s * 1e3);
  return t;
}

}  // namespace layerstream::planning

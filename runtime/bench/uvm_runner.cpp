#include "runtime/bench/uvm_runner.h"

#include <fmt/format.h>

#include <algorithm>

#include "layerstream/units.h"
#include "io/reader.h"
#include "runtime/bench/executor_runner.h"
#include "runtime/bench/llama_bench.h"

#if LAYERSTREAM_HAVE_CUDA_BACKEND
#include <cuda_runtime_api.h>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_check.h"
#include "runtime/device/cuda/cuda_managed.h"
#endif

namespace layerstream::bench {

std::string uvm_unavailable_reason(const DeviceInfo& info) {
#if LAYERSTREAM_HAVE_CUDA_BACKEND
  if (info.backend == BackendKind::kCuda) return "";
  return fmt::format("uvm needs the cuda backend (CUDA managed memory); this run uses the {} backend",
                     name_of(info.backend));
#else
  return "uvm needs the cuda backend (CUDA managed memory); layerstream was built without CUDA";
#endif
}

#if LAYERSTREAM_HAVE_CUDA_BACKEND
namespace {

struct LayerSpan {
  std::string name;
  uint64_t offset = 0, bytes = 0;
};

// What the runner owns: the managed file, the per-layer spans and which
// prefetches are issued and not yet waited for. Declared before the
// LlamaRunner in UvmOwner so the runner (whose callbacks use it) goes first.
struct UvmState {
  std::unique_ptr<cuda::ManagedModelFile> file;
  std::vector<LayerSpan> spans;
  std::vector<bool> issued;

  // Before layer i's compute: its prefetch (issued now if the previous layer
  // did not), the compute stream waits for it, then layer i+1's prefetch.
  Status before_layer(int i, Stream& compute) {
    const int n = static_cast<int>(spans.size());
    if (i < 0 || i >= n) return Status::Internal(fmt::format("uvm: layer {} of {}", i, n));
    if (!issued[i]) LS_RETURN_IF_ERROR(file->prefetch(spans[i].offset, spans[i].bytes, i));
    LS_RETURN_IF_ERROR(file->wait(i, compute.native_handle()));
    issued[i] = false;
    const int next = (i + 1) % n;
    if (!issued[next]) {
      LS_RETURN_IF_ERROR(file->prefetch(spans[next].offset, spans[next].bytes, next));
      issued[next] = true;
    }
    return Status::OK();
  }
};

struct UvmOwner {
  std::shared_ptr<UvmState> state;
  std::shared_ptr<llama::LlamaRunner> runner;
  ~UvmOwner() { runner.reset(); }  // the runner's callbacks use state
};

class UvmRunner : public ExecutorRunner {
 public:
  UvmRunner(std::shared_ptr<UvmOwner> owner, sched::Executor& ex, std::function<Status()> step,
            std::vector<std::string> names)
      : ExecutorRunner(owner, ex, std::move(step), std::move(names)), state_(owner->state) {}

  std::string plan_description() const override {
    uint64_t all = 0;
    for (const LayerSpan& s : state_->spans) all += s.bytes;
    return fmt::format("uvm: {} layers ({}) in a {} managed allocation (read-mostly, preferred on the CPU), "
                       "each prefetched to the device one layer ahead; the arena holds KV and activations only",
                       state_->spans.size(), format_bytes(all), format_bytes(state_->file->size()));
  }
  // The real layer sizes (the executor only sees placeholders). Tier: RAM,
  // the pages' home; the device holds duplicates the driver manages.
  std::vector<LayerDesc> layers() const override {
    std::vector<LayerDesc> out;
    for (const LayerSpan& s : state_->spans) out.push_back({s.name, s.bytes, sched::Tier::kRam});
    return out;
  }

 private:
  std::shared_ptr<UvmState> state_;
};

}  // namespace
#endif

Result<std::unique_ptr<BenchRunner>> make_uvm_bench_runner(Device& device, const std::string& path,
                                                           llama::RunnerOptions o, const LlamaWorkload& work) {
  if (std::string why = uvm_unavailable_reason(device.info()); !why.empty()) return Status::Unsupported(why);
#if LAYERSTREAM_HAVE_CUDA_BACKEND
  if (work.tokens < 1) return Status::InvalidArgument("bench: tokens per pass must be >= 1");
  o = workload_runner_options(std::move(o), work);
  // Every layer is a resident placeholder: no planner, no window.
  o.strategy = llama::Strategy::kResident;
  o.pins.clear();
  o.plan.reset();
  // The executor's layers (file spans) in executor order.
  LS_ASSIGN_OR_RETURN(llama::RunnerFootprint fp, llama::LlamaRunner::footprint(path, o, BackendKind::kCuda));
  auto state = std::make_shared<UvmState>();
  for (const sched::LayerSpec& l : fp.layers) state->spans.push_back({l.name, l.file_offset, l.bytes});
  state->issued.assign(state->spans.size(), false);
  if (state->spans.empty()) return Status::InvalidArgument(path + ": no layers to run");

  // The arena: reserve plus the placeholders (all that the executor holds).
  const uint64_t arena = fp.reserve.total() + state->spans.size() * sched::kSlotAlignment + (1ull << 20);
  if (o.vram_budget == 0 || o.vram_budget > arena) o.vram_budget = arena;
  int ordinal = 0;
  LS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&ordinal));
  // The file is read once, through a reader with the run's options (buffered:
  // O_DIRECT into managed memory is not asked of the driver).
  io::ReaderOptions ro = o.reader;
  ro.path = io::IoPath::kBuffered;
  LS_ASSIGN_OR_RETURN(std::unique_ptr<io::Reader> rd, io::open_reader(path, ro));
  auto read = [&rd](uint64_t offset, uint64_t bytes, void* dst) { return rd->read_span(offset, bytes, dst); };
  LS_ASSIGN_OR_RETURN(state->file, cuda::ManagedModelFile::load(path, rd->file_size(), read, ordinal, o.vram_budget,
                                                                static_cast<int>(state->spans.size())));
  UvmState* sp = state.get();
  o.external_weights = llama::RunnerOptions::ExternalWeights{
      state->file->data(), [sp](int layer, Stream& s) { return sp->before_layer(layer, s); }};

  LS_ASSIGN_OR_RETURN(auto runner, llama::LlamaRunner::create(device, path, o));
  auto owner = std::make_shared<UvmOwner>();
  owner->state = state;
  owner->runner = std::shared_ptr<llama::LlamaRunner>(std::move(runner));
  llama::LlamaRunner* r = owner->runner.get();
  std::vector<std::string> names;
  for (const LayerSpan& s : state->spans) names.push_back(s.name);
  return std::unique_ptr<BenchRunner>(
      new UvmRunner(owner, r->executor(), workload_step(r, work), std::move(names)));
#else
  return Status::Unsupported("uvm needs the cuda backend");
#endif
}

}  // namespace layerstream::bench

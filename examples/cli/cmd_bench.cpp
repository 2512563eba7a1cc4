// `layerstream bench MODEL`: runs the same workload with several strategies
// (resident, serial, overlap, planned) side by side in one run, interleaved
// pass by pass when their runners fit in memory together (else in
// alternating strategy-by-strategy blocks), and prints min/median/max pass
// time, tokens/s, stalls, bytes streamed, the lower bound, overlap
// efficiency, predicted vs measured and each strategy's ratio to the best.
// --json / --trace / --report write the machine-readable result, a Chrome
// trace and a self-contained HTML report.
#include <fmt/format.h>
#include <sys/stat.h>

#include <iostream>

#include "examples/cli/cli_common.h"
#include "layerstream/units.h"
#include "runtime/bench/box_probe.h"
#include "runtime/bench/llama_bench.h"
#include "runtime/bench/report_html.h"
#include "runtime/bench/session.h"
#include "runtime/bench/trace_export.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"

namespace layerstream::cli {
namespace {

class BenchCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    sub.add_option("model", model_, "GGUF model file")->required();
    sub.add_option("--vram", vram_, "Device memory budget (default: half the model)");
    sub.add_option("--ram", ram_, "Pinned host RAM budget for RAM-tier layers and staging")->capture_default_str();
    device_.add_to(sub);
    sub.add_option("--io", io_, "Disk I/O path: auto, uring, pread, buffered")->capture_default_str();
    sub.add_option("--staging-chunk", staging_chunk_,
                   "Staged disk path: bytes per staging buffer / read (default: the --box probe's best, else 4MiB)");
    sub.add_option("--staging-buffers", staging_buffers_, "Staged disk path: staging buffers = reads in flight")
        ->capture_default_str();
    sub.add_option("--mode", mode_, "decode or prefill")->capture_default_str();
    sub.add_option("--prompt-len", prompt_len_, "Prefill: tokens per sequence")->capture_default_str();
    sub.add_option("--batch", batch_, "Sequences per pass")->capture_default_str();
    sub.add_option("--ctx", ctx_, "Decode: positions per sequence (KV cache)")->capture_default_str();
    sub.add_option("--passes", passes_, "Measured passes per strategy")->capture_default_str();
    sub.add_option("--warmup", warmup_, "Warm-up passes per strategy")->capture_default_str();
    sub.add_option("--strategies", strategies_, "Comma-separated subset of resident,serial,overlap,planned,host")
        ->capture_default_str();
    sub.add_option("--host-factor", host_factor_,
                   "Hybrid execution: a block's host compute time before it is measured, relative to its device "
                   "time; > 0 lets `planned` choose each block's site (1 on the host backend, where both are the "
                   "same CPU kernels). 0 = `planned` keeps every block on the device; `host` uses max(1, this)")
        ->capture_default_str();
    sub.add_option("--overlap-slots", overlap_slots_, "Window slots of the overlap strategy")->capture_default_str();
    sub.add_flag("--blocks", force_blocks_, "Run strategy-by-strategy blocks even when all runners fit together");
    sub.add_option("--box", box_, "Probe JSON (`layerstream probe --json`) seeding link/disk GB/s");
    sub.add_option("--json", json_path_, "Write the result as JSON to FILE");
    sub.add_option("--trace", trace_path_, "Write a Chrome trace-event JSON (Perfetto) to FILE");
    sub.add_option("--report", report_path_, "Write a self-contained HTML report to FILE");
  }

  int run() override {
    // ---- flags
    auto dopt = device_.options();
    if (!dopt.ok()) return usage_error(dopt.status().message());
    auto io_path = io::parse_io_path(io_);
    if (!io_path.ok()) return usage_error("--io: " + io_path.status().message());
    if (mode_ != "decode" && mode_ != "prefill") return usage_error("--mode: expected decode or prefill, got '" + mode_ + "'");
    if (prompt_len_ < 1) return usage_error("--prompt-len must be >= 1");
    if (batch_ < 1) return usage_error("--batch must be >= 1");
    if (passes_ < 1) return usage_error("--passes must be >= 1");
    if (warmup_ < 0) return usage_error("--warmup must be >= 0");
    auto ram = parse_size_flag("--ram", ram_);
    if (!ram.ok()) return usage_error(ram.status().message());
    std::vector<std::string> wanted;
    for (size_t pos = 0; pos <= strategies_.size();) {
      size_t end = strategies_.find(',', pos);
      if (end == std::string::npos) end = strategies_.size();
      std::string n = strategies_.substr(pos, end - pos);
      if (!n.empty()) {
        if (!llama::parse_strategy(n).ok()) return usage_error("--strategies: unknown strategy '" + n + "'");
        wanted.push_back(n);
      }
      pos = end + 1;
    }
    if (wanted.empty()) return usage_error("--strategies: none given");

    // ---- model (sizes for the budget and the resident check)
    auto file = read_gguf_file(model_);
    if (!file.ok()) return fail(file.status());
    auto model = load_llama_model(*file);
    if (!model.ok()) return fail(model.status().WithContext(model_));
    struct stat st {};
    const uint64_t file_bytes = ::stat(model_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    uint64_t weight_bytes = 0;
    for (const ModelLayer& l : model->layers) weight_bytes += l.aligned_bytes();
    uint64_t vram = weight_bytes / 2;
    if (!vram_.empty()) {
      auto v = parse_size_flag("--vram", vram_);
      if (!v.ok()) return usage_error(v.status().message());
      vram = *v;
    }

    // ---- device and prior
    auto dev = open_device(*dopt);
    if (!dev.ok()) return fail(dev.status());
    const DeviceInfo& info = (*dev)->info();
    bench::BoxInfo box;
    box.backend = std::string(backend_name(info.backend));
    box.device = info.name;
    box.sim_link_gbps = info.sim_link_gbps;
    double link_gbps = 0, disk_gbps = 0;
    uint64_t staging_chunk = 0;
    box.link_source = box.disk_source = "measured by the runners";
    if (!box_.empty()) {
      auto prior = bench::load_box_prior(box_, *io_path);
      if (!prior.ok()) return fail(prior.status());
      link_gbps = prior->link_gbps;
      disk_gbps = prior->disk_gbps > 0 ? prior->disk_gbps : 0;
      box.link_source = prior->source;
      if (disk_gbps > 0) box.disk_source = prior->source;
      staging_chunk = prior->staging_chunk_bytes;
    }
    if (!staging_chunk_.empty()) {
      auto c = parse_size_flag("--staging-chunk", staging_chunk_);
      if (!c.ok()) return usage_error(c.status().message());
      if (*c < 4096) return usage_error("--staging-chunk must be at least 4KiB");
      staging_chunk = *c;
    }
    if (staging_buffers_ < 1 || staging_buffers_ > 64) return usage_error("--staging-buffers must be in [1, 64]");
    if (dopt->sim_link_gbps > 0 && info.backend == BackendKind::kHost) {
      link_gbps = dopt->sim_link_gbps;
      box.link_source = "--sim-link";
    }

    // ---- strategies
    bench::LlamaWorkload work;
    work.mode = mode_ == "decode" ? bench::BenchMode::kDecode : bench::BenchMode::kPrefill;
    work.tokens = work.mode == bench::BenchMode::kDecode ? batch_ : prompt_len_ * batch_;
    llama::RunnerOptions ro;
    ro.vram_budget = vram;
    ro.ram_budget = *ram;
    ro.overlap_slots = overlap_slots_;
    ro.link_gbps = link_gbps;
    ro.disk_gbps = disk_gbps;
    ro.reader.path = *io_path;
    ro.staging_buffer_bytes = staging_chunk;
    ro.staging_buffers = static_cast<unsigned>(staging_buffers_);
    ro.trace = true;
    ro.host_compute_factor = host_factor_;
    if (work.mode == bench::BenchMode::kDecode) ro.n_ctx = ctx_;
    const uint64_t footprint = info.backend == BackendKind::kHost ? vram + *ram : vram;
    std::vector<bench::StrategySpec> specs;
    Device* device = dev->get();
    for (const std::string& name : wanted) {
      bench::StrategySpec s;
      s.name = name;
      s.footprint_bytes = footprint;
      llama::RunnerOptions o = ro;
      o.strategy = *llama::parse_strategy(name);
      if (o.strategy == llama::Strategy::kResident) {
        s.skip_if_out_of_budget = true;
        if (weight_bytes > vram)
          s.skip_reason = fmt::format("the model's layers need {} ({} B), the VRAM budget is {} ({} B)",
                                      format_bytes(weight_bytes), weight_bytes, format_bytes(vram), vram);
      }
      s.create = [device, path = model_, o, work] { return bench::make_llama_bench_runner(*device, path, o, work); };
      specs.push_back(std::move(s));
    }
    bench::SessionOptions so;
    so.warmup = warmup_;
    so.passes = passes_;
    so.force_blocks = force_blocks_;
    // Host backend: device memory is host RAM, so every runner's arena and
    // pinned buffers come out of the same free memory; keep a fifth spare.
    so.memory_available = info.free_memory_bytes / 5 * 4;
    so.progress = [](const std::string& s) { std::cerr << s << "\n"; };
    auto out = bench::run_session(specs, so);
    if (!out.ok()) return fail(out.status());

    // ---- result
    bench::BenchResult r;
    box.link_gbps = link_gbps > 0 ? link_gbps : out->link_gbps;
    box.disk_gbps = disk_gbps > 0 ? disk_gbps : out->disk_gbps;
    if (disk_gbps <= 0 && out->disk_gbps <= 0) box.disk_source = "unused";
    r.box = box;
    r.model.file = model_;
    r.model.bytes = file_bytes;
    r.model.weight_bytes = weight_bytes;
    r.model.layers = static_cast<int>(model->layers.size());
    r.model.blocks = static_cast<int>(model->blocks.size());
    r.model.dtype = model->blocks.empty() ? "" : ggml_type_name(static_cast<uint32_t>(model->blocks[0].ffn_up.type));
    r.vram_budget = vram;
    r.ram_budget = *ram;
    r.workload.mode = mode_;
    r.workload.prompt_len = work.mode == bench::BenchMode::kPrefill ? prompt_len_ : 0;
    r.workload.batch = batch_;
    r.workload.warmup = warmup_;
    r.workload.passes = passes_;
    r.workload.tokens_per_pass = work.tokens;
    r.workload.io = std::string(io::io_path_name(*io_path));
    r.schedule = out->schedule;
    r.schedule_reason = out->schedule_reason;
    r.strategies = std::move(out->strategies);
    bench::finalize(r);
    std::cout << bench::format_table(r);
    if (!json_path_.empty()) {
      if (Status s = write_json_file(json_path_, bench::to_json(r)); !s.ok()) return fail(s);
    }
    if (!trace_path_.empty()) {
      if (Status s = bench::write_text_file(trace_path_, bench::bench_chrome_json(r, out->trace)); !s.ok())
        return fail(s);
    }
    if (!report_path_.empty()) {
      if (Status s = bench::write_html_report(report_path_, r); !s.ok()) return fail(s);
    }
    return kExitOk;
  }

 private:
  std::string model_, vram_, ram_ = "64MiB", io_ = "auto", mode_ = "decode";
  std::string strategies_ = "resident,serial,overlap,planned";
  double host_factor_ = 0;
  std::string box_, json_path_, trace_path_, report_path_;
  DeviceFlags device_;
  std::string staging_chunk_;
  int prompt_len_ = 64, batch_ = 1, ctx_ = 256, passes_ = 5, warmup_ = 2, overlap_slots_ = 2, staging_buffers_ = 24;
  bool force_blocks_ = false;
};

}  // namespace
LS_REGISTER_COMMAND(BenchCommand, "bench", "Run strategies side by side on a model and show where time goes");
}  // namespace layerstream::cli

// `layerstream bench MODEL`: runs the same workload with several strategies
// (resident, serial, overlap, planned) side by side in one run, interleaved
// pass by pass when their runners fit in memory together (else in
// alternating strategy-by-strategy blocks), and prints min/median/max pass
// time, tokens/s, stalls, bytes streamed, the lower bound, overlap
// efficiency, predicted vs measured and each strategy's ratio to the best.
// --json / --trace / --report write the machine-readable result, a Chrome
// trace and a self-contained HTML report.
// --box FILE (a box profile, docs/BOX_PROFILE.md) also predicts each
// strategy's pass from the profile's figures (box_predict.h): next to the
// measured table when the profile is this machine's, instead of running when
// it is another box's, when --shape gives a model without a file, or with
// --predict-only.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <iostream>

#include "examples/cli/bench_speculative.h"
#include "examples/cli/cli_common.h"
#include "layerstream/units.h"
#include "runtime/bench/box_predict.h"
#include "runtime/planning/box_probe.h"
#include "runtime/planning/box_profile.h"
#include "runtime/bench/llama_bench.h"
#include "runtime/bench/report_html.h"
#include "runtime/bench/session.h"
#include "runtime/bench/trace_export.h"
#include "runtime/bench/uvm_runner.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_shape.h"

namespace layerstream::cli {
namespace {

class BenchCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    add_model_or_shape_args(sub, model_, shape_, "predict for");
    sub.add_flag("--predict-only", predict_only_, "With --box: print the profile's prediction, run nothing");
    sub.add_option("--vram", vram_, "Device memory budget (default: half the model)");
    sub.add_option("--ram", ram_, "Pinned host RAM budget for RAM-tier layers and staging")->capture_default_str();
    device_.add_to(sub);
    add_io_flag(sub, io_);
    sub.add_option("--staging-chunk", staging_chunk_,
                   "Staged disk path: bytes per staging buffer / read (default: the --box probe's best, else 4MiB)");
    sub.add_option("--staging-buffers", staging_buffers_, "Staged disk path: staging buffers = reads in flight")
        ->capture_default_str();
    sub.add_option("--mode", mode_, "decode or prefill")->capture_default_str();
    sub.add_option("--prompt-len", prompt_len_, "Prefill: tokens per sequence")->capture_default_str();
    sub.add_option("--batch", batch_, "Sequences per pass")->capture_default_str();
    sub.add_option("--ctx", ctx_, "Decode: positions per sequence (KV cache)")->capture_default_str();
    sub.add_option("--decode-pos", decode_pos_,
                   "Decode: every pass at this context position (attention over POS cached positions; "
                   "-1: positions advance from 0)")
        ->capture_default_str();
    add_kv_type_flag(sub, kv_type_);
    add_exact_flag(sub, exact_);
    sub.add_option("--passes", passes_, "Measured passes per strategy")->capture_default_str();
    sub.add_option("--warmup", warmup_, "Warm-up passes per strategy")->capture_default_str();
    sub.add_option("--strategies", strategies_,
                   "Comma-separated subset of resident,serial,overlap,planned,host,uvm (uvm: cuda backend only)")
        ->capture_default_str();
    sub.add_option("--host-factor", host_factor_,
                   "Hybrid execution: override a block's host compute time before it is measured, relative to its "
                   "device time (`planned` chooses each block's site, device, host or split by rows, either way). "
                   "0 = predicted: with --box host figures their ratio to the device's, else equal on the host "
                   "backend (the same CPU kernels) and unknown on a GPU until measured; `host` uses max(1, this)")
        ->capture_default_str();
    sub.add_option("--overlap-slots", overlap_slots_, "Window slots of the overlap strategy")->capture_default_str();
    sub.add_flag("--blocks", force_blocks_, "Run strategy-by-strategy blocks even when all runners fit together");
    sub.add_option("--box", box_,
                   "Box profile (`layerstream probe --json`, or written by hand: docs/BOX_PROFILE.md): seeds link/disk "
                   "GB/s and predicts each strategy from its figures");
    add_json_flag(sub, json_path_);
    sub.add_option("--trace", trace_path_, "Write a Chrome trace-event JSON (Perfetto) to FILE");
    sub.add_option("--report", report_path_, "Write a self-contained HTML report to FILE");
    spec_.add_to(sub);
    sub.add_option("--spec-prompt", spec_prompt_, "With --draft/--lookup: the prompt")->capture_default_str();
    sub.add_option("--spec-tokens", spec_tokens_, "With --draft/--lookup: tokens generated per round")
        ->capture_default_str();
  }

  // Flags, the model's sizes, the device and its prior, the strategies run
  // side by side, then the result in every format asked for.
  int run() override {
    Flags f;
    if (int rc = parse_flags(f); rc != kExitOk) return rc;
    if (spec_.any()) return run_speculative(f);
    if (model_.empty() == shape_.empty()) return usage_error("give a GGUF model file or --shape (one of them)");
    if ((!shape_.empty() || predict_only_) && box_.empty())
      return usage_error(std::string(shape_.empty() ? "--predict-only" : "--shape") +
                         " needs --box FILE (the figures to predict with)");
    std::optional<planning::BoxFigures> figures;
    if (!box_.empty()) {
      auto fig = planning::load_box_figures(box_, f.io);
      if (!fig.ok()) return fail(fig.status());
      figures = std::move(*fig);
    }
    std::optional<ExampleModelSpec> shape;
    if (!shape_.empty()) {
      auto spec = parse_model_shape(shape_);
      if (!spec.ok()) return usage_error("--shape: " + spec.status().message());
      shape = *spec;
    }
    auto file = shape ? model_shape_file(*shape, "shape " + shape_) : read_gguf_file(model_);
    if (!file.ok()) return fail(file.status());
    auto model = load_llama_model(*file);
    if (!model.ok()) return fail(model.status().WithContext(file->path()));
    uint64_t weight_bytes = 0;
    for (const ModelLayer& l : model->layers) weight_bytes += l.aligned_bytes();
    uint64_t vram = weight_bytes / 2;
    if (!vram_.empty()) {
      auto v = parse_size_flag("--vram", vram_);
      if (!v.ok()) return usage_error(v.status().message());
      vram = *v;
    }

    // A profile of another box (or a model without a file): predict, run nothing.
    std::string predict_why = !shape_.empty() ? "--shape: no model file to run" : predict_only_ ? "--predict-only" : "";
    std::unique_ptr<Device> device;
    if (figures && predict_why.empty()) {
      auto dev = open_device(f.device);
      if (!dev.ok()) return fail(dev.status());
      const DeviceInfo& info = (*dev)->info();
      if (!planning::box_is_this_machine(*figures, std::string(name_of(info.backend)), info.name))
        predict_why = fmt::format("the profile describes {} ({} backend{}), this run is on {} ({} backend)",
                                  figures->device_name, figures->backend,
                                  figures->host_cpu.empty() ? "" : ", " + figures->host_cpu, info.name,
                                  name_of(info.backend));
      device = std::move(*dev);
    }
    std::optional<bench::BoxPrediction> prediction;
    if (figures) {
      auto pr = predict(*figures, *file, f, vram);
      if (!pr.ok()) return fail(pr.status());
      prediction = std::move(*pr);
    }
    if (!predict_why.empty()) return print_prediction_only(*prediction, predict_why);
    if (prediction && host_factor_ <= 0 && prediction->host_factor > 0) {
      host_factor_ = prediction->host_factor;
      std::cerr << fmt::format("bench: --host-factor {:.3f} from the box profile (blocks' host / device compute)\n",
                               host_factor_);
    }
    if (!device) {
      auto dev = open_device(f.device);
      if (!dev.ok()) return fail(dev.status());
      device = std::move(*dev);
    }
    Prior prior;
    if (int rc = read_prior(device->info(), f, prior); rc != kExitOk) return rc;

    auto out = bench::run_session(strategy_specs(*device, f, prior, vram, weight_bytes), session_options(*device));
    if (!out.ok()) return fail(out.status());
    const bench::BenchResult r = make_result(*model, f, prior, vram, weight_bytes, *out);
    return report(r, out->trace, prediction);
  }

  bench::SessionOptions session_options(const Device& device) const {
    bench::SessionOptions so;
    so.warmup = warmup_;
    so.passes = passes_;
    so.force_blocks = force_blocks_;
    // Host backend: device memory is host RAM, so every runner's arena and
    // pinned buffers come out of the same free memory; keep a fifth spare.
    so.memory_available = device.info().free_memory_bytes / 5 * 4;
    so.progress = [](const std::string& s) { std::cerr << s << "\n"; };
    return so;
  }

  // The table, the prediction next to what was measured, and the files asked for.
  int report(const bench::BenchResult& r, const std::vector<std::vector<sched::TraceEvent>>& trace,
             const std::optional<bench::BoxPrediction>& prediction) const {
    std::cout << bench::format_table(r);
    std::map<std::string, double> measured;
    for (const bench::StrategyResult& s : r.strategies)
      if (!s.skipped && s.pass_ms.median > 0) measured[s.name] = s.pass_ms.median * 1e-3;
    if (prediction) std::cout << "\n" << bench::format_prediction(*prediction, measured);
    return write_outputs(r, trace, prediction ? bench::to_json(*prediction, measured) : nlohmann::json());
  }

 private:
  // The flags checked and parsed (the rest are read where used).
  struct Flags {
    DeviceOptions device;
    io::IoPath io = io::IoPath::kAuto;
    uint64_t ram = 0;
    std::vector<std::string> strategies;
    bench::BenchMode mode = bench::BenchMode::kDecode;
  };
  // The rates the runners start from and where they come from.
  struct Prior {
    bench::BoxInfo box;
    double link_gbps = 0, disk_gbps = 0;  // 0: the runners measure
    uint64_t staging_chunk = 0;           // 0: the reader's default
  };

  // --draft / --lookup: generation with and without speculation side by
  // side (--passes rounds each) on the public API, at the same budgets.
  int run_speculative(const Flags& f) const {
    if (model_.empty()) return usage_error("--draft/--lookup run a model file (not --shape)");
    auto backend = backend_from_name(device_.backend);
    if (!backend.ok()) return usage_error("--backend: " + backend.status().message());
    uint64_t vram = 0;  // 0: the library's default
    if (!vram_.empty()) {
      auto v = parse_size_flag("--vram", vram_);
      if (!v.ok()) return usage_error(v.status().message());
      vram = *v;
    }
    const ModelOptions model{.vram_budget = vram,
                             .ram_budget = f.ram,
                             .backend = *backend,
                             .sim_link_gbps = f.device.sim_link_gbps,
                             .host_threads = f.device.host_threads,
                             .exact = exact_,
                             .context = ctx_,
                             .kv_type = kv_type_ == "f16" ? KvType::kF16 : KvType::kF32};
    const SpeculativeBenchOptions o{.model_path = model_, .model = model, .spec = spec_, .prompt = spec_prompt_,
                                    .tokens = spec_tokens_, .rounds = passes_, .json = json_path_};
    return run_speculative_bench(o);
  }

  int parse_flags(Flags& f) const {
    auto dopt = device_.options();
    if (!dopt.ok()) return usage_error(dopt.status().message());
    f.device = *dopt;
    auto io_path = io_path_from_name(io_);
    if (!io_path.ok()) return usage_error("--io: " + io_path.status().message());
    f.io = *io_path;
    if (mode_ != "decode" && mode_ != "prefill") return usage_error("--mode: expected decode or prefill, got '" + mode_ + "'");
    f.mode = mode_ == "decode" ? bench::BenchMode::kDecode : bench::BenchMode::kPrefill;
    if (prompt_len_ < 1) return usage_error("--prompt-len must be >= 1");
    if (batch_ < 1) return usage_error("--batch must be >= 1");
    if (passes_ < 1) return usage_error("--passes must be >= 1");
    if (warmup_ < 0) return usage_error("--warmup must be >= 0");
    if (decode_pos_ < -1) return usage_error("--decode-pos must be >= 0 (or -1: positions advance)");
    if (kv_type_ != "f32" && kv_type_ != "f16") return usage_error("--kv-type: '" + kv_type_ + "' is not f32 or f16");
    auto ram = parse_size_flag("--ram", ram_);
    if (!ram.ok()) return usage_error(ram.status().message());
    f.ram = *ram;
    for (size_t pos = 0; pos <= strategies_.size();) {
      size_t end = strategies_.find(',', pos);
      if (end == std::string::npos) end = strategies_.size();
      std::string n = strategies_.substr(pos, end - pos);
      if (!n.empty()) {
        if (n != "uvm" && !llama::parse_strategy(n).ok())
          return usage_error("--strategies: unknown strategy '" + n + "' (resident, serial, overlap, planned, host, uvm)");
        f.strategies.push_back(n);
      }
      pos = end + 1;
    }
    if (f.strategies.empty()) return usage_error("--strategies: none given");
    return kExitOk;
  }

  // Prints (and writes with --json) a prediction made instead of running;
  // fails when no strategy runs at the budgets.
  int print_prediction_only(const bench::BoxPrediction& p, const std::string& why) const {
    std::cout << "not running (" << why << "): predicting from the box profile\n" << bench::format_prediction(p);
    std::string why_none;
    for (const auto& s : p.strategies)
      if (!s.error.empty()) why_none += (why_none.empty() ? "" : "; ") + s.name + ": " + s.error;
    if (std::all_of(p.strategies.begin(), p.strategies.end(), [](const auto& s) { return !s.error.empty(); }))
      return fail(Status::OutOfBudget("no strategy runs at these budgets (" + why_none + ")"));
    if (!json_path_.empty())
      if (Status s = write_json_file(json_path_, {{"prediction", bench::to_json(p)}}); !s.ok()) return fail(s);
    return kExitOk;
  }

  // The box profile's prediction for the strategies asked (uvm aside), with
  // the runners' options; --sim-link replaces the link of a host profile.
  Result<bench::BoxPrediction> predict(const planning::BoxFigures& box, const GgufFile& file, const Flags& f,
                                       uint64_t vram) const {
    bench::PredictOptions po;
    po.runner = runner_options(f, Prior{}, vram);
    po.work = workload(f);
    for (const std::string& s : f.strategies)
      if (s != "uvm") po.strategies.push_back(s);
    if (f.device.sim_link_gbps > 0 && box.backend == "host") po.link_gbps = f.device.sim_link_gbps;
    return bench::predict_with_box(box, file, po);
  }

  bench::LlamaWorkload workload(const Flags& f) const {
    bench::LlamaWorkload work;
    work.mode = f.mode;
    work.tokens = work.mode == bench::BenchMode::kDecode ? batch_ : prompt_len_ * batch_;
    work.decode_pos = decode_pos_;
    return work;
  }

  // The options every strategy's runner shares (the strategy aside).
  llama::RunnerOptions runner_options(const Flags& f, const Prior& p, uint64_t vram) const {
    llama::RunnerOptions ro;
    ro.vram_budget = vram;
    ro.ram_budget = f.ram;
    ro.overlap_slots = overlap_slots_;
    ro.link_gbps = p.link_gbps;
    ro.disk_gbps = p.disk_gbps;
    ro.reader.path = f.io;
    ro.staging_buffer_bytes = p.staging_chunk;
    ro.staging_buffers = static_cast<unsigned>(staging_buffers_);
    ro.trace = true;
    ro.host_compute_factor = host_factor_;
    ro.host_threads = device_.host_threads;
    ro.exact = exact_;
    ro.kv_type = kv_type_ == "f16" ? GgmlType::F16 : GgmlType::F32;
    if (f.mode == bench::BenchMode::kDecode) ro.n_ctx = std::max(ctx_, decode_pos_ + 1);
    return ro;
  }

  // Link and disk rates from --box (else measured by the runners), the
  // staging chunk from --staging-chunk or the box, --sim-link on the host.
  int read_prior(const DeviceInfo& info, const Flags& f, Prior& p) const {
    p.box.backend = std::string(name_of(info.backend));
    p.box.device = info.name;
    p.box.sim_link_gbps = info.sim_link_gbps;
    p.box.link_source = p.box.disk_source = "measured by the runners";
    if (!box_.empty()) {
      auto prior = planning::load_box_prior(box_, f.io);
      if (!prior.ok()) return fail(prior.status());
      p.link_gbps = prior->link_gbps;
      p.disk_gbps = prior->disk_gbps > 0 ? prior->disk_gbps : 0;
      p.box.link_source = prior->source;
      if (p.disk_gbps > 0) p.box.disk_source = prior->source;
      p.staging_chunk = prior->staging_chunk_bytes;
    }
    if (!staging_chunk_.empty()) {
      auto c = parse_size_flag("--staging-chunk", staging_chunk_);
      if (!c.ok()) return usage_error(c.status().message());
      if (*c < 4096) return usage_error("--staging-chunk must be at least 4KiB");
      p.staging_chunk = *c;
    }
    if (staging_buffers_ < 1 || staging_buffers_ > 64) return usage_error("--staging-buffers must be in [1, 64]");
    if (f.device.sim_link_gbps > 0 && info.backend == BackendKind::kHost) {
      p.link_gbps = f.device.sim_link_gbps;
      p.box.link_source = "--sim-link";
    }
    return kExitOk;
  }

  // One runner factory per strategy asked for, all with the same options
  // but the strategy; resident is skipped when the layers exceed the budget.
  std::vector<bench::StrategySpec> strategy_specs(Device& device, const Flags& f, const Prior& p, uint64_t vram,
                                                  uint64_t weight_bytes) const {
    const bench::LlamaWorkload work = workload(f);
    const llama::RunnerOptions ro = runner_options(f, p, vram);
    const uint64_t footprint = device.info().backend == BackendKind::kHost ? vram + f.ram : vram;
    std::vector<bench::StrategySpec> specs;
    Device* dev = &device;
    for (const std::string& name : f.strategies) {
      bench::StrategySpec s;
      s.name = name;
      s.footprint_bytes = footprint;
      llama::RunnerOptions o = ro;
      if (name == "uvm") {  // weights in managed memory (uvm_runner.h); skipped off the cuda backend
        s.skip_reason = bench::uvm_unavailable_reason(device.info());
        s.skip_if_out_of_budget = true;  // the file + arena exceed the card's free memory: skipped, saying so
        s.footprint_bytes = vram + weight_bytes;  // the arena (at most) and the file's tensors
        s.create = [dev, path = model_, o, work] { return bench::make_uvm_bench_runner(*dev, path, o, work); };
        specs.push_back(std::move(s));
        continue;
      }
      o.strategy = *llama::parse_strategy(name);
      if (o.strategy == llama::Strategy::kResident) {
        s.skip_if_out_of_budget = true;
        if (weight_bytes > vram)
          s.skip_reason = fmt::format("the model's layers need {} ({} B), the VRAM budget is {} ({} B)",
                                      format_bytes(weight_bytes), weight_bytes, format_bytes(vram), vram);
      }
      s.create = [dev, path = model_, o, work] { return bench::make_llama_bench_runner(*dev, path, o, work); };
      specs.push_back(std::move(s));
    }
    return specs;
  }

  bench::BenchResult make_result(const LlamaModel& model, const Flags& f, const Prior& p, uint64_t vram,
                                 uint64_t weight_bytes, bench::SessionOutput& out) const {
    bench::BenchResult r;
    r.box = p.box;
    r.box.link_gbps = p.link_gbps > 0 ? p.link_gbps : out.link_gbps;
    r.box.disk_gbps = p.disk_gbps > 0 ? p.disk_gbps : out.disk_gbps;
    if (p.disk_gbps <= 0 && out.disk_gbps <= 0) r.box.disk_source = "unused";
    struct stat st {};
    r.model.file = model_;
    r.model.bytes = ::stat(model_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    r.model.weight_bytes = weight_bytes;
    r.model.layers = static_cast<int>(model.layers.size());
    r.model.blocks = static_cast<int>(model.blocks.size());
    if (!model.blocks.empty()) {  // the type of the FFN's up matrix (a mixture of experts': its experts')
      const LlamaBlock& b0 = model.blocks[0];
      r.model.dtype = ggml_type_name(static_cast<uint32_t>(b0.moe ? b0.moe->up_exps.type : b0.ffn_up.type));
    }
    r.vram_budget = vram;
    r.ram_budget = f.ram;
    r.workload.mode = mode_;
    r.workload.prompt_len = f.mode == bench::BenchMode::kPrefill ? prompt_len_ : 0;
    r.workload.batch = batch_;
    r.workload.warmup = warmup_;
    r.workload.passes = passes_;
    r.workload.tokens_per_pass = f.mode == bench::BenchMode::kDecode ? batch_ : prompt_len_ * batch_;
    r.workload.io = std::string(name_of(f.io));
    r.schedule = out.schedule;
    r.schedule_reason = out.schedule_reason;
    r.strategies = std::move(out.strategies);
    bench::finalize(r);
    return r;
  }

  // --json, --trace, --report.
  int write_outputs(const bench::BenchResult& r, const std::vector<std::vector<sched::TraceEvent>>& trace,
                    const nlohmann::json& prediction) const {
    if (!json_path_.empty()) {
      nlohmann::json doc = bench::to_json(r);
      if (!prediction.is_null()) doc["prediction"] = prediction;
      if (Status s = write_json_file(json_path_, doc); !s.ok()) return fail(s);
    }
    if (!trace_path_.empty()) {
      if (Status s = bench::write_text_file(trace_path_, bench::bench_chrome_json(r, trace)); !s.ok()) return fail(s);
    }
    if (!report_path_.empty()) {
      if (Status s = bench::write_html_report(report_path_, r); !s.ok()) return fail(s);
    }
    return kExitOk;
  }

 private:
  std::string shape_;
  bool predict_only_ = false;
  SpeculativeFlags spec_;
  std::string spec_prompt_ =
      "Repeat this passage exactly. Passage: The quick brown fox jumps over the lazy dog near the river bank, "
      "and the dog sleeps on in the warm afternoon sun. Repeated: The quick brown fox";
  int spec_tokens_ = 64;
  std::string model_, vram_, ram_ = "64MiB", io_ = "auto", mode_ = "decode", kv_type_ = "f32";
  std::string strategies_ = "resident,serial,overlap,planned";
  double host_factor_ = 0;
  std::string box_, json_path_, trace_path_, report_path_;
  DeviceFlags device_;
  std::string staging_chunk_;
  int prompt_len_ = 64, batch_ = 1, ctx_ = 256, passes_ = 5, warmup_ = 2, overlap_slots_ = 2, staging_buffers_ = 24,
      decode_pos_ = -1;
  bool force_blocks_ = false, exact_ = false;
};

}  // namespace
LS_REGISTER_COMMAND(BenchCommand, "bench", "Run strategies side by side on a model and show where time goes");
}  // namespace layerstream::cli

// `layerstream quantize IN.gguf OUT.gguf --type q4_k_m`: re-encodes a model's
// matrices at a lower precision, as llama.cpp's llama-quantize does (same
// per-tensor choices, same scale searches, --imatrix), tensor by tensor in
// bounded memory. A progress bar with an ETA on a terminal, a line per
// tensor otherwise; Ctrl-C stops it and leaves no output file.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "examples/cli/cli_common.h"
#include "layerstream/units.h"
#include "runtime/model/imatrix.h"
#include "runtime/model/quantize.h"

namespace layerstream::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_quantize_interrupt(int) { g_interrupted.store(true); }

// Draws "[=====>     ]  45% 1.2 GiB / 2.6 GiB  ETA 0:00:12  blk.3.ffn_up.weight"
// on a terminal; prints one line per finished tensor otherwise.
class ProgressView {
 public:
  explicit ProgressView(bool tty) : tty_(tty), start_(std::chrono::steady_clock::now()) {}

  void update(const QuantizeProgress& p) {
    if (!tty_) {
      if (p.tensor_done) {
        std::cerr << "[" << p.tensor + 1 << "/" << p.n_tensors << "] " << p.name << ": " << ggml_type_traits(p.from).name
                  << (p.from == p.to ? " (copied)" : std::string(" -> ") + ggml_type_traits(p.to).name) << "\n";
      }
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!p.tensor_done && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double frac = p.total_bytes ? static_cast<double>(p.done_bytes) / static_cast<double>(p.total_bytes) : 1.0;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const std::string eta = frac > 0.01 ? format_seconds(elapsed / frac - elapsed) : "--:--:--";
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < kWidth) bar += '>' + std::string(static_cast<size_t>(kWidth - filled - 1), ' ');
    std::cerr << "\r[" << bar << "] " << static_cast<int>(frac * 100) << "% " << format_bytes(p.done_bytes) << " / "
              << format_bytes(p.total_bytes) << "  ETA " << eta << "  " << p.name << "\x1b[K" << std::flush;
  }

  void finish() {
    if (tty_) std::cerr << "\n";
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_{};
};

class QuantizeCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    sub.add_option("in", in_, "Input GGUF model (F32, F16 or BF16; quantised with --allow-requantize)")->required();
    sub.add_option("out", out_, "Output GGUF file (written via OUT.tmp, renamed when complete)")->required();
    sub.add_option("--type", type_, "Target: " + quant_target_names())->required();
    sub.add_flag("--allow-requantize", allow_requantize_, "Re-encode tensors that are already quantised");
    sub.add_flag("--pure", pure_, "Every matrix at --type: no per-tensor mix rules and no fallback type");
    sub.add_option("--imatrix", imatrix_, "Importance matrix (GGUF, from llama-imatrix) steering the scale search");
    sub.add_option("--threads", threads_, "Encoder threads (0: every core)");
    sub.add_option("--align", align_, "general.alignment of the output: 4096 (to stream) or 32 (as llama.cpp writes)")
        ->capture_default_str();
    sub.add_option("--json", json_path_, "Write the result as JSON to FILE");
  }

  int run() override {
    const std::optional<QuantTarget> target = parse_quant_target(type_);
    if (!target) return usage_error("--type: unknown type '" + type_ + "' (one of " + quant_target_names() + ")");
    if (align_ < 8 || align_ > 65536 || (align_ & (align_ - 1)) != 0) {
      return usage_error("--align: " + std::to_string(align_) + " is not a power of two in 8..65536");
    }
    QuantizeOptions opt;
    opt.target = *target;
    opt.pure = pure_;
    opt.allow_requantize = allow_requantize_;
    opt.threads = threads_;
    opt.alignment = align_;
    std::optional<ImportanceMatrix> im;
    if (!imatrix_.empty()) {
      auto r = read_imatrix_file(imatrix_);
      if (!r.ok()) return fail(r.status());
      im = std::move(*r);
      opt.imatrix = &*im;
      opt.imatrix_path = imatrix_;
    }
    ProgressView view(stderr_is_tty());
    opt.progress = [&view](const QuantizeProgress& p) { view.update(p); };
    opt.cancel = &g_interrupted;

    struct sigaction sa {}, old_int{}, old_term{};
    sa.sa_handler = on_quantize_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    // Past a file-size limit a write fails with EFBIG (reported, the
    // temporary file removed) instead of the signal killing the process.
    std::signal(SIGXFSZ, SIG_IGN);
    const auto t0 = std::chrono::steady_clock::now();
    Result<QuantizeReport> rep = quantize_model(in_, out_, opt);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    view.finish();
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (!rep.ok()) return fail(rep.status());
    print(*rep, *target, secs);
    if (!json_path_.empty()) {
      nlohmann::json j = {{"in", in_},           {"out", out_},         {"type", target->name},
                          {"in_bytes", rep->in_bytes}, {"out_bytes", rep->out_bytes}, {"tensors", rep->n_tensors},
                          {"converted", rep->n_converted}, {"fallback", rep->n_fallback},
                          {"imatrix_tensors", rep->n_imatrix}, {"seconds", secs}};
      if (Status s = write_json_file(json_path_, j); !s.ok()) return fail(s);
    }
    return kExitOk;
  }

 private:
  void print(const QuantizeReport& r, const QuantTarget& t, double secs) const {
    std::cout << "wrote " << out_ << ": " << t.name << ", " << format_bytes(r.out_bytes) << " (from "
              << format_bytes(r.in_bytes) << "), " << r.n_converted << " of " << r.n_tensors << " tensors re-encoded";
    if (r.n_fallback) std::cout << ", " << r.n_fallback << " at a fallback type (rows not a multiple of 256)";
    if (r.n_imatrix) std::cout << ", " << r.n_imatrix << " with the importance matrix";
    std::cout << ", " << format_seconds(secs) << "\n";
  }

  std::string in_, out_, type_, imatrix_, json_path_;
  bool allow_requantize_ = false, pure_ = false;
  unsigned threads_ = 0;
  uint32_t align_ = 4096;
};

}  // namespace
LS_REGISTER_COMMAND(QuantizeCommand, "quantize",
                    "Quantize a GGUF model (Q4_K_M, Q5_K_M, Q8_0, IQ4_XS, ...) as llama-quantize does");
}  // namespace layerstream::cli

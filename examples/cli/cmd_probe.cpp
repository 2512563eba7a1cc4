// `layerstream probe`: measures the box (H2D bandwidth pinned/pageable per
// chunk size, disk read bandwidth per I/O path, matmul rate per weight type,
// device memory, and the host site: RAM read bandwidth and CPU matmul rates
// per type), prints a table and optionally writes the box profile JSON
// (docs/BOX_PROFILE.md) that `bench --box`, `plan --box` and `run --box` take.
#include <cstdio>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>

#include "examples/cli/cli_common.h"
#include "layerstream/units.h"
#include "runtime/planning/box_probe.h"
#include "runtime/core/status_macros.h"

namespace layerstream::cli {
namespace {

class ProbeCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    sub_ = &sub;
    sub.add_option("--disk", disk_, "File to read for the disk figures (default: a scratch file in the temp dir)");
    sub.add_option("--disk-bytes", disk_bytes_, "Read at most this much of the file per I/O path")->capture_default_str();
    sub.add_option("--scratch-size", scratch_bytes_, "Size of the scratch file when no --disk is given")
        ->capture_default_str();
    device_.add_to(sub);
    sub.add_option("--seconds", seconds_, "Seconds per measured point")->capture_default_str();
    sub.add_option("--matmul", matmul_, "Matmul weight shape n_out x n_in, e.g. 8192x4096")->capture_default_str();
    sub.add_option("--prefill-tokens", prefill_tokens_, "Tokens of the prefill-shaped matmul (0: 32 host, 512 cuda)");
    sub.add_option("--types", types_, "Weight types, comma separated (f32,f16,bf16,q8_0,q4_0,q4_1)")
        ->capture_default_str();
    sub.add_flag("--no-disk", no_disk_, "Skip the disk figures");
    sub.add_flag("--no-compute", no_compute_, "Skip the device matmul figures");
    sub.add_option("--host-types", host_types_,
                   "Host site: weight types of the CPU matmul figures, comma separated")
        ->capture_default_str();
    sub.add_option("--host-matmul", host_matmul_,
                   "Host site: prefill GEMM weight shape N_OUTxN_IN (N_IN, a multiple of 256, is the decode matrix's "
                   "too)")
        ->capture_default_str();
    sub.add_option("--host-decode-bytes", host_decode_bytes_,
                   "Host site: weight bytes of the decode matrix (above the caches: RAM-bound)")
        ->capture_default_str();
    sub.add_option("--host-prefill-tokens", host_prefill_tokens_, "Host site: tokens of the prefill GEMM")
        ->capture_default_str();
    sub.add_option("--ram-bytes", ram_bytes_, "Host site: buffer of the RAM read bandwidth figure")
        ->capture_default_str();
    sub.add_flag("--no-host", no_host_, "Skip the host site's figures (RAM bandwidth, CPU matmul rates)");
    sub.add_flag("--quick", quick_,
                 "Fewer, shorter points (~15 s): 0.1 s each, 2 H2D chunk sizes, 256 MiB of disk, no staging sweep, "
                 "device types q8_0,q4_0 and host types q8_0,q4_k,q6_k unless given");
    add_json_flag(sub, json_path_);
  }

  int run() override {
    auto options = probe_options();
    if (!options.ok()) return usage_error(options.status().message());
    planning::ProbeOptions& o = *options;
    o.progress = [](const std::string& s) { std::cerr << "probe: " << s << "\n"; };
    auto r = planning::probe_box(o);
    if (!r.ok()) return fail(r.status());
    std::cout << planning::format_probe_table(*r);
    if (!json_path_.empty()) {
      if (Status s = write_json_file(json_path_, planning::to_json(*r)); !s.ok()) return fail(s);
      std::cout << "wrote " << json_path_ << " (use it with `bench --box " << json_path_ << "`)\n";
    }
    return kExitOk;
  }

 private:
  // The flags as ProbeOptions; InvalidArgument naming the flag otherwise.
  Result<planning::ProbeOptions> probe_options() const {
    planning::ProbeOptions o;
    LS_ASSIGN_OR_RETURN(o.device, device_.options());
    if (!(seconds_ > 0 && seconds_ <= 60)) return Status::InvalidArgument("--seconds must be in (0, 60]");
    o.seconds_per_point = seconds_;
    o.disk = !no_disk_;
    o.disk_file = disk_;
    LS_ASSIGN_OR_RETURN(o.disk_region_bytes, parse_size_flag("--disk-bytes", disk_bytes_));
    LS_ASSIGN_OR_RETURN(o.scratch_bytes, parse_size_flag("--scratch-size", scratch_bytes_));
    o.compute = !no_compute_;
    LS_ASSIGN_OR_RETURN(std::tie(o.matmul_n_out, o.matmul_n_in), parse_matrix_shape("--matmul", matmul_, 32));
    o.prefill_tokens = prefill_tokens_;
    LS_ASSIGN_OR_RETURN(o.types, parse_types("--types", types_));
    o.host = !no_host_;
    LS_ASSIGN_OR_RETURN(o.host_types, parse_types("--host-types", host_types_));
    LS_ASSIGN_OR_RETURN(std::tie(o.host_prefill_n_out, o.host_n_in),
                        parse_matrix_shape("--host-matmul", host_matmul_, 256));
    if (host_prefill_tokens_ < 2) return Status::InvalidArgument("--host-prefill-tokens must be >= 2");
    o.host_prefill_tokens = host_prefill_tokens_;
    LS_ASSIGN_OR_RETURN(o.host_decode_bytes, parse_size_flag("--host-decode-bytes", host_decode_bytes_));
    LS_ASSIGN_OR_RETURN(o.ram_bytes, parse_size_flag("--ram-bytes", ram_bytes_));
    if (o.ram_bytes < (1 << 20)) return Status::InvalidArgument("--ram-bytes must be at least 1MiB");
    if (quick_) {
      if (!seconds_given(sub_)) o.seconds_per_point = 0.1;
      o.chunk_bytes = {1 << 20, 16 << 20};
      o.disk_region_bytes = std::min<uint64_t>(o.disk_region_bytes, 256ull << 20);
      o.disk_seconds_per_path = 1.0;
      o.staging_sweep = false;
      if (sub_->count("--host-decode-bytes") == 0) o.host_decode_bytes = 128ull << 20;
      if (sub_->count("--ram-bytes") == 0) o.ram_bytes = 512ull << 20;
      if (sub_->count("--types") == 0) o.types = {GgmlType::Q8_0, GgmlType::Q4_0};
      if (sub_->count("--host-types") == 0) o.host_types = {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K};
    }
    return o;
  }

  // "N_OUTxN_IN" (or N_OUTXN_IN), both positive and N_IN a multiple of `n_in_multiple`.
  static Result<std::pair<int64_t, int64_t>> parse_matrix_shape(const std::string& flag, const std::string& text,
                                                                 int64_t n_in_multiple) {
    long long n_out = 0, n_in = 0;
    char x = 0;
    if (std::sscanf(text.c_str(), "%lld%c%lld", &n_out, &x, &n_in) != 3 || (x != 'x' && x != 'X') || n_out <= 0 ||
        n_in <= 0 || n_in % n_in_multiple != 0)
      return Status::InvalidArgument(flag + ": expected N_OUTxN_IN with N_IN a multiple of " +
                                     std::to_string(n_in_multiple) + ", got '" + text + "'");
    return std::pair<int64_t, int64_t>{n_out, n_in};
  }

  static Result<std::vector<GgmlType>> parse_types(const std::string& flag, const std::string& list) {
    std::vector<GgmlType> out;
    for (size_t pos = 0; pos <= list.size();) {
      size_t end = list.find(',', pos);
      if (end == std::string::npos) end = list.size();
      std::string name = list.substr(pos, end - pos);
      if (!name.empty()) {
        auto t = parse_ggml_type(name);
        if (!t) return Status::InvalidArgument(flag + ": unknown type '" + name + "'");
        out.push_back(*t);
      }
      pos = end + 1;
    }
    return out;
  }
  static bool seconds_given(CLI::App* app) { return app->count("--seconds") > 0; }

  CLI::App* sub_ = nullptr;
  DeviceFlags device_;
  std::string disk_, json_path_, matmul_ = "8192x4096", types_ = "f32,f16,bf16,q8_0,q4_0,q4_1";
  std::string disk_bytes_ = "1GiB", scratch_bytes_ = "256MiB";
  double seconds_ = 0.25;
  int prefill_tokens_ = 0;
  std::string host_matmul_ = "4096x4096", host_decode_bytes_ = "256MiB", ram_bytes_ = "1GiB";
  int host_prefill_tokens_ = 64;
  std::string host_types_ = "q8_0,q4_0,q4_1,q5_0,q4_k,q5_k,q6_k";
  bool no_disk_ = false, no_compute_ = false, no_host_ = false, quick_ = false;
};

}  // namespace
LS_REGISTER_COMMAND(ProbeCommand, "probe", "Measure the box: H2D bandwidth, disk read bandwidth, matmul rate, memory");
}  // namespace layerstream::cli

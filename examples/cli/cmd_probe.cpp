// `layerstream probe`: measures the box (H2D bandwidth pinned/pageable per
// chunk size, disk read bandwidth per I/O path, matmul rate per weight type,
// device memory), prints a table and optionally writes JSON that `bench
// --box` (and `run --box`) take as the planner's prior.
#include <iostream>

#include "examples/cli/cli_common.h"
#include "layerstream/units.h"
#include "runtime/bench/box_probe.h"

namespace layerstream::cli {
namespace {

class ProbeCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
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
    sub.add_flag("--no-compute", no_compute_, "Skip the matmul figures");
    sub.add_option("--json", json_path_, "Write the result as JSON to FILE");
  }

  int run() override {
    bench::ProbeOptions o;
    auto device = device_.options();
    if (!device.ok()) return usage_error(device.status().message());
    o.device = *device;
    if (!(seconds_ > 0 && seconds_ <= 60)) return usage_error("--seconds must be in (0, 60]");
    o.seconds_per_point = seconds_;
    o.disk = !no_disk_;
    o.disk_file = disk_;
    auto db = parse_size_flag("--disk-bytes", disk_bytes_);
    if (!db.ok()) return usage_error(db.status().message());
    o.disk_region_bytes = *db;
    auto sb = parse_size_flag("--scratch-size", scratch_bytes_);
    if (!sb.ok()) return usage_error(sb.status().message());
    o.scratch_bytes = *sb;
    o.compute = !no_compute_;
    long long n_out = 0, n_in = 0;
    char x = 0;
    if (std::sscanf(matmul_.c_str(), "%lld%c%lld", &n_out, &x, &n_in) != 3 || (x != 'x' && x != 'X') || n_out <= 0 ||
        n_in <= 0 || n_in % 32 != 0)
      return usage_error("--matmul: expected N_OUTxN_IN with N_IN a multiple of 32, got '" + matmul_ + "'");
    o.matmul_n_out = n_out;
    o.matmul_n_in = n_in;
    o.prefill_tokens = prefill_tokens_;
    o.types.clear();
    for (size_t pos = 0; pos <= types_.size();) {
      size_t end = types_.find(',', pos);
      if (end == std::string::npos) end = types_.size();
      std::string name = types_.substr(pos, end - pos);
      if (!name.empty()) {
        auto t = parse_ggml_type(name);
        if (!t) return usage_error("--types: unknown type '" + name + "'");
        o.types.push_back(*t);
      }
      pos = end + 1;
    }
    o.progress = [](const std::string& s) { std::cerr << "probe: " << s << "\n"; };
    auto r = bench::probe_box(o);
    if (!r.ok()) return fail(r.status());
    std::cout << bench::format_probe_table(*r);
    if (!json_path_.empty()) {
      if (Status s = write_json_file(json_path_, bench::to_json(*r)); !s.ok()) return fail(s);
      std::cout << "wrote " << json_path_ << " (use it with `bench --box " << json_path_ << "`)\n";
    }
    return kExitOk;
  }

 private:
  DeviceFlags device_;
  std::string disk_, json_path_, matmul_ = "8192x4096", types_ = "f32,f16,bf16,q8_0,q4_0,q4_1";
  std::string disk_bytes_ = "1GiB", scratch_bytes_ = "256MiB";
  double seconds_ = 0.25;
  int prefill_tokens_ = 0;
  bool no_disk_ = false, no_compute_ = false;
};

}  // namespace
LS_REGISTER_COMMAND(ProbeCommand, "probe", "Measure the box: H2D bandwidth, disk read bandwidth, matmul rate, memory");
}  // namespace layerstream::cli

#include "runtime/planning/box_profile.h"
#include "runtime/core/status_macros.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

namespace layerstream::planning {

using nlohmann::json;

const ComputePoint* RateTable::find(const std::string& type, const std::string& shape) const {
  auto it = points.find({type, shape});
  if (it != points.end()) return &it->second;
  for (const auto& [k, p] : points)
    if (k.second == shape) return &p;
  return nullptr;
}

double matmul_seconds(const RateTable& r, GgmlType type, int64_t n_out, int64_t n_in, uint64_t bytes, int tokens,
                      double decode_gbps_fallback) {
  const std::string name = ggml_type_name(static_cast<uint32_t>(type));
  const ComputePoint* dec = r.find(name, "decode");
  const ComputePoint* pre = r.find(name, "prefill");
  const double gbps = dec && dec->weight_gbps > 0 ? dec->weight_gbps : decode_gbps_fallback;
  const double mem_s = gbps > 0 ? bytes / (gbps * 1e9) : 0;
  const double flop_s = pre && pre->gflops > 0 ? 2.0 * n_out * n_in * tokens / (pre->gflops * 1e9) : 0;
  return tokens <= 1 ? mem_s : std::max(mem_s, flop_s);
}

namespace {

Result<double> rate(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) return Status::Corruption(fmt::format("{}: no \"{}\" field", where, key));
  const json& v = j.at(key);
  if (!v.is_number() || !(v.get<double>() >= 0))
    return Status::Corruption(fmt::format("{}: \"{}\" is not a non-negative number: {}", where, key, v.dump()));
  return v.get<double>();
}

// A "compute" array into a table. A point needs type and shape and at least
// one of weight_gbps / gflops / gmacs (gmacs = gflops / 2).
Result<RateTable> rate_table(const json& a, const std::string& where) {
  RateTable t;
  if (a.is_null()) return t;
  if (!a.is_array()) return Status::Corruption(fmt::format("{}: not an array", where));
  for (size_t i = 0; i < a.size(); ++i) {
    const json& c = a[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!c.is_object() || !c.contains("type") || !c["type"].is_string() || !c.contains("shape") ||
        !c["shape"].is_string())
      return Status::Corruption(fmt::format("{}: a compute point needs \"type\" and \"shape\" strings", at));
    ComputePoint p;
    p.type = c["type"].get<std::string>();
    p.shape = c["shape"].get<std::string>();
    if (p.shape != "decode" && p.shape != "prefill")
      return Status::Corruption(fmt::format("{}: shape \"{}\" is not decode or prefill", at, p.shape));
    auto t_opt = parse_ggml_type(p.type);
    if (!t_opt) return Status::Corruption(fmt::format("{}: unknown weight type \"{}\"", at, p.type));
    p.type = ggml_type_name(static_cast<uint32_t>(*t_opt));  // canonical spelling ("q4_k" -> "Q4_K")
    if (c.contains("n_tokens")) {
      LS_ASSIGN_OR_RETURN(double n, rate(c, "n_tokens", at));
      p.n_tokens = static_cast<int64_t>(n);
    }
    if (c.contains("weight_gbps")) {
      LS_ASSIGN_OR_RETURN(p.weight_gbps, rate(c, "weight_gbps", at));
    }
    if (c.contains("gflops")) {
      LS_ASSIGN_OR_RETURN(p.gflops, rate(c, "gflops", at));
    } else if (c.contains("gmacs")) {
      LS_ASSIGN_OR_RETURN(double g, rate(c, "gmacs", at));
      p.gflops = 2 * g;
    }
    if (p.weight_gbps <= 0 && p.gflops <= 0)
      return Status::Corruption(fmt::format("{}: {} {} has neither weight_gbps nor gflops/gmacs > 0", at, p.type, p.shape));
    t.points[{p.type, p.shape}] = p;
  }
  return t;
}

}  // namespace

Result<BoxFigures> box_figures_from_json(const json& doc, const std::string& source, io::IoPath io_path) {
  LS_ASSIGN_OR_RETURN(BoxPrior prior, box_prior_from_json(doc, source, io_path));
  BoxFigures b;
  b.source = source;
  b.link_gbps = prior.link_gbps;
  b.disk_gbps = prior.disk_gbps;
  if (doc.contains("box") && doc["box"].is_object()) {
    b.backend = doc["box"].value("backend", "");
    b.device_name = doc["box"].value("device", "");
  }
  if (doc.contains("notes") && doc["notes"].is_string()) b.notes = doc["notes"].get<std::string>();
  LS_ASSIGN_OR_RETURN(b.device, rate_table(doc.contains("compute") ? doc["compute"] : json(nullptr), source + ": compute"));
  if (doc.contains("host") && !doc["host"].is_null()) {
    const json& h = doc["host"];
    const std::string where = source + ": host";
    if (!h.is_object()) return Status::Corruption(where + ": not an object");
    if (h.contains("ram_read_gbps")) {
      LS_ASSIGN_OR_RETURN(b.ram_read_gbps, rate(h, "ram_read_gbps", where));
    }
    if (h.contains("threads")) {
      LS_ASSIGN_OR_RETURN(double t, rate(h, "threads", where));
      b.host_threads = static_cast<int>(t);
    }
    if (h.contains("cpu") && h["cpu"].is_string()) b.host_cpu = h["cpu"].get<std::string>();
    LS_ASSIGN_OR_RETURN(b.host, rate_table(h.contains("compute") ? h["compute"] : json(nullptr), where + ".compute"));
  }
  if (b.device.empty() && !(b.backend == "host" && !b.host.empty()))
    return Status::Corruption(source + " has no device compute figures (\"compute\"; run `layerstream probe --json` "
                                       "with compute, or write them: docs/BOX_PROFILE.md)");
  return b;
}

Result<BoxFigures> load_box_figures(const std::string& path, io::IoPath io_path) {
  std::ifstream f(path);
  if (!f) return Status::FromErrno(fmt::format("open box file {}", path), errno);
  json doc = json::parse(f, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (doc.is_discarded()) return Status::Corruption(fmt::format("box file {}: not valid JSON", path));
  return box_figures_from_json(doc, "box file " + path, io_path);
}

bool box_is_this_machine(const BoxFigures& box, const std::string& backend, const std::string& device) {
  if (box.backend != backend) return false;
  const std::string cpu = host_cpu_name();
  const bool cpu_known = !box.host_cpu.empty() && !cpu.empty();
  if (cpu_known && box.host_cpu != cpu) return false;
  // The host backend's device name counts its threads ("host (16 threads)"):
  // a run with another --host-threads is still this machine when the CPU is.
  if (backend == "host" && cpu_known) return true;
  return box.device_name == device;
}

}  // namespace layerstream::planning

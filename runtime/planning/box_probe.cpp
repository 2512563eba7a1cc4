#include "runtime/planning/box_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "layerstream/units.h"
#include "runtime/planning/box_probe_steps.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"

namespace layerstream::planning {

std::string host_cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t c = line.find(':');
    if (c == std::string::npos) continue;
    const size_t b = line.find_first_not_of(" \t", c + 1);
    return b == std::string::npos ? std::string() : line.substr(b);
  }
  return {};
}

Result<BoxProfile> probe_box(const ProbeOptions& o) {
  using namespace probe_steps;
  LS_ASSIGN_OR_RETURN(auto dev, open_device(o.device));
  const DeviceInfo& info = dev->info();
  BoxProfile out;
  out.backend = std::string(name_of(info.backend));
  out.device = info.name;
  out.total_memory_bytes = info.total_memory_bytes;
  out.free_memory_bytes = info.free_memory_bytes;
  out.copy_engines = info.copy_engines;
  out.sim_link_gbps = info.sim_link_gbps;
  if (o.h2d) LS_RETURN_IF_ERROR(probe_h2d(*dev, o, out));
  if (o.disk && !o.io_paths.empty()) LS_RETURN_IF_ERROR(probe_disk(o, out));
  if (o.compute && !o.types.empty()) LS_RETURN_IF_ERROR(probe_compute(*dev, o, out));
  if (o.host) LS_RETURN_IF_ERROR(probe_host(o, info, out));
  return out;
}

nlohmann::json to_json(const BoxProfile& b) {
  using nlohmann::json;
  json h2d = json::array();
  for (const H2dPoint& p : b.h2d)
    h2d.push_back({{"memory", p.memory}, {"chunk_bytes", p.chunk_bytes}, {"bytes", p.bytes}, {"seconds", p.seconds},
                   {"gbps", p.gbps}});
  json disk = json::array();
  json by_path = json::object();
  for (const DiskPoint& p : b.disk) {
    json j = {{"path", p.path}, {"description", p.description}, {"direct", p.direct}, {"bytes", p.bytes},
              {"seconds", p.seconds}, {"gbps", p.gbps}, {"cache_dropped", p.cache_dropped}};
    j["cached_before"] = p.cached_before >= 0 ? json(p.cached_before) : json(nullptr);
    if (!p.error.empty()) j["error"] = p.error;
    else by_path[p.path] = p.gbps;
    disk.push_back(std::move(j));
  }
  json staging = json::array();
  for (const auto& [chunk, gbps] : b.staging_gbps_by_chunk) staging.push_back({{"chunk_bytes", chunk}, {"gbps", gbps}});
  auto points = [](const std::vector<ComputePoint>& v) {
    json a = json::array();
    for (const ComputePoint& c : v)
      a.push_back({{"type", c.type}, {"shape", c.shape}, {"n_out", c.n_out}, {"n_in", c.n_in},
                   {"n_tokens", c.n_tokens}, {"weight_bytes", c.weight_bytes}, {"ms", c.ms},
                   {"weight_gbps", c.weight_gbps}, {"gflops", c.gflops}, {"gmacs", c.gmacs()}});
    return a;
  };
  json compute = points(b.compute);
  json host = nullptr;
  if (b.host)
    host = {{"cpu", b.host->cpu},
            {"threads", b.host->threads},
            {"ram_read_bytes", b.host->ram_read_bytes},
            {"ram_read_gbps", b.host->ram_read_gbps},
            {"compute", points(b.host->compute)}};
  json doc = {{"probe_version", 2},
          {"box",
           {{"backend", b.backend},
            {"device", b.device},
            {"total_memory_bytes", b.total_memory_bytes},
            {"free_memory_bytes", b.free_memory_bytes},
            {"copy_engines", b.copy_engines},
            {"sim_link_gbps", b.sim_link_gbps}}},
          {"link_gbps", b.link_gbps},
          {"pageable_link_gbps", b.pageable_link_gbps},
          {"disk_gbps", b.disk_gbps},
          {"disk_gbps_by_path", by_path},
          {"staging_chunk_bytes", b.staging_chunk_bytes},
          {"staging_gbps_by_chunk", staging},
          {"h2d", h2d},
          {"disk", {{"file", b.disk_file}, {"file_bytes", b.disk_file_bytes}, {"scratch", b.disk_scratch},
                    {"points", disk}}},
          {"compute", compute}};
  if (b.host) doc["host"] = std::move(host);
  return doc;
}

std::string format_probe_table(const BoxProfile& b) {
  std::string o;
  o += fmt::format("device: {} ({} backend), memory {} total, {} free, {} copy engine(s){}\n", b.device, b.backend,
                   format_bytes(b.total_memory_bytes), format_bytes(b.free_memory_bytes), b.copy_engines,
                   b.sim_link_gbps > 0 ? fmt::format(", sim link {:.2f} GB/s", b.sim_link_gbps) : "");
  if (!b.h2d.empty()) {
    o += "\nhost -> device    chunk        GB/s\n";
    for (const H2dPoint& p : b.h2d)
      o += fmt::format("  {:<12} {:>10} {:>11.2f}\n", p.memory, format_bytes(p.chunk_bytes), p.gbps);
  }
  if (!b.disk.empty()) {
    o += fmt::format("\ndisk: {} ({}{})\n", b.disk_file, format_bytes(b.disk_file_bytes),
                     b.disk_scratch ? ", scratch file written by the probe" : "");
    o += "  path       GB/s        read   seconds  cache before  description\n";
    for (const DiskPoint& p : b.disk) {
      if (!p.error.empty()) {
        o += fmt::format("  {:<9} not measured: {}\n", p.path, p.error);
        continue;
      }
      std::string cache = p.cached_before < 0 ? "unknown" : fmt::format("{:.0f}%", p.cached_before * 100);
      if (p.cache_dropped) cache += " (dropped)";
      o += fmt::format("  {:<9} {:>6.2f} {:>11} {:>9.2f}  {:<13} {}\n", p.path, p.gbps, format_bytes(p.bytes),
                       p.seconds, cache, p.description);
    }
  }
  if (!b.compute.empty()) {
    o += "\nmatmul   shape     tokens   n_out x n_in        ms   weight GB/s   GFLOP/s\n";
    for (const ComputePoint& c : b.compute)
      o += fmt::format("  {:<6} {:<8} {:>6}   {:>5} x {:<5} {:>10.3f} {:>13.2f} {:>9.1f}\n", c.type, c.shape,
                       c.n_tokens, c.n_out, c.n_in, c.ms, c.weight_gbps, c.gflops);
  }
  if (b.host) {
    o += fmt::format("\nhost site: {} threads{}, RAM read {:.2f} GB/s ({})\n", b.host->threads,
                     b.host->cpu.empty() ? "" : ", " + b.host->cpu, b.host->ram_read_gbps,
                     format_bytes(b.host->ram_read_bytes));
    o += "  matmul shape     tokens    n_out x n_in        ms   weight GB/s    GMAC/s\n";
    for (const ComputePoint& c : b.host->compute)
      o += fmt::format("  {:<6} {:<8} {:>6}   {:>6} x {:<5} {:>10.3f} {:>13.2f} {:>9.1f}\n", c.type, c.shape,
                       c.n_tokens, c.n_out, c.n_in, c.ms, c.weight_gbps, c.gmacs());
  }
  o += fmt::format("\nplanner prior: link {:.2f} GB/s (best pinned H2D), disk {:.2f} GB/s (best O_DIRECT read)\n",
                   b.link_gbps, b.disk_gbps);
  return o;
}

Result<BoxPrior> box_prior_from_json(const nlohmann::json& doc, const std::string& source, io::IoPath io_path) {
  auto rate = [&](const nlohmann::json& j, const char* key) -> Result<double> {
    if (!j.is_object() || !j.contains(key)) return Status::Corruption(fmt::format("{}: no \"{}\" field", source, key));
    const auto& v = j.at(key);
    if (!v.is_number() || !(v.get<double>() >= 0))
      return Status::Corruption(fmt::format("{}: \"{}\" is not a non-negative number: {}", source, key, v.dump()));
    return v.get<double>();
  };
  if (!doc.is_object() || !doc.contains("probe_version"))
    return Status::Corruption(fmt::format("{}: not a `layerstream probe --json` result (no probe_version)", source));
  BoxPrior p;
  p.source = source;
  LS_ASSIGN_OR_RETURN(p.link_gbps, rate(doc, "link_gbps"));
  LS_ASSIGN_OR_RETURN(p.disk_gbps, rate(doc, "disk_gbps"));
  if (io_path != io::IoPath::kAuto && doc.contains("disk_gbps_by_path")) {
    const std::string name(name_of(io_path));
    const auto& by = doc.at("disk_gbps_by_path");
    if (by.is_object() && by.contains(name)) {
      LS_ASSIGN_OR_RETURN(p.disk_gbps, rate(by, name.c_str()));
    }
  }
  if (doc.contains("staging_chunk_bytes")) {
    const auto& v = doc.at("staging_chunk_bytes");
    if (!v.is_number_unsigned())
      return Status::Corruption(fmt::format("{}: \"staging_chunk_bytes\" is not a byte count: {}", source, v.dump()));
    p.staging_chunk_bytes = v.get<uint64_t>();
    if (p.staging_chunk_bytes != 0 && (p.staging_chunk_bytes < 4096 || p.staging_chunk_bytes > (1ull << 30)))
      return Status::Corruption(fmt::format("{}: staging_chunk_bytes {} is outside [4 KiB, 1 GiB]", source,
                                            p.staging_chunk_bytes));
  }
  if (p.link_gbps <= 0) return Status::Corruption(fmt::format("{}: link_gbps is 0 (H2D was not measured)", source));
  return p;
}

Result<BoxPrior> load_box_prior(const std::string& path, io::IoPath io_path) {
  std::ifstream f(path);
  if (!f) return Status::FromErrno(fmt::format("open box file {}", path), errno);
  nlohmann::json doc = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::Corruption(fmt::format("box file {}: not valid JSON", path));
  return box_prior_from_json(doc, "box file " + path, io_path);
}

}  // namespace layerstream::planning


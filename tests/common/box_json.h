// Box profiles written by hand (docs/BOX_PROFILE.md, probe_version 2), for
// the suites that plan and predict from a box's figures without probing one.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace layerstream::testing {

// A CUDA box measured for one weight type: the device's decode GB/s and
// prefill GFLOP/s, and the host site's threads, RAM read GB/s, decode GB/s
// and prefill GMAC/s for the same type.
struct HandWrittenBox {
  std::string device, type, notes;  // notes: none when empty
  double link_gbps = 0, disk_gbps = 0, decode_gbps = 0, prefill_gflops = 0;
  int host_threads = 0;
  double ram_read_gbps = 0, host_decode_gbps = 0, host_prefill_gmacs = 0;
};

inline nlohmann::json box_json(const HandWrittenBox& b) {
  auto point = [&](const char* shape, const char* unit, double value) {
    return nlohmann::json{{"type", b.type}, {"shape", shape}, {unit, value}};
  };
  nlohmann::json box = {
      {"probe_version", 2},
      {"box", {{"backend", "cuda"}, {"device", b.device}}},
      {"link_gbps", b.link_gbps},
      {"disk_gbps", b.disk_gbps},
      {"compute", {point("decode", "weight_gbps", b.decode_gbps), point("prefill", "gflops", b.prefill_gflops)}},
      {"host",
       {{"threads", b.host_threads},
        {"ram_read_gbps", b.ram_read_gbps},
        {"compute",
         {point("decode", "weight_gbps", b.host_decode_gbps), point("prefill", "gmacs", b.host_prefill_gmacs)}}}}};
  if (!b.notes.empty()) box["notes"] = b.notes;
  return box;
}

}  // namespace layerstream::testing

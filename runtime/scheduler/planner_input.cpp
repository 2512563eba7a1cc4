#include "runtime/scheduler/planner_input.h"

#include "runtime/scheduler/plan.h"

namespace layerstream::sched {

bool disk_reads_direct(const DeviceInfo& device, bool force_staging) {
  return device.host_addressable && !force_staging;
}

DeviceInfo device_info_for(BackendKind backend, bool copies_only) {
  DeviceInfo info;
  info.backend = backend;
  info.host_addressable = backend == BackendKind::kHost && !copies_only;
  return info;
}

bool may_use_host_site(const ExecutorOptions& o) {
  return o.host_policy != HostPolicy::kNever ||
         (o.plan && o.plan->count_site(Site::kHost) + o.plan->count_site(Site::kSplit) > 0);
}

double host_factor_before_measurement(const ExecutorOptions& o, const DeviceInfo& device) {
  if (o.host_compute_factor > 0) return o.host_compute_factor;
  return device.backend == BackendKind::kHost ? 1.0 : 0.0;
}

PlannerInput layer_planner_input(const std::vector<LayerSpec>& layers) {
  PlannerInput in;
  for (const LayerSpec& l : layers) {
    in.bytes.push_back(l.bytes);
    in.spans.push_back(slot_span(l));
    in.from_file.push_back(l.from_file());
    in.pins.push_back(l.pin);
    in.host_ok.push_back(l.host_ok);
    uint64_t sb = 0;
    for (const SplitTensor& t : l.split_tensors) sb += t.bytes;
    in.split_bytes.push_back(l.host_ok ? sb : 0);
  }
  return in;
}

PlannerInput executor_planner_input(const std::vector<LayerSpec>& layers, const ExecutorOptions& o, bool disk_direct,
                                    const CostModel& cost, int batch_class) {
  PlannerInput in = layer_planner_input(layers);
  in.host_policy = o.host_policy;
  const uint64_t reserve = round_up(o.reserved_vram, kSlotAlignment);
  in.vram_budget = o.vram_budget > reserve ? o.vram_budget - reserve : 0;
  in.ram_budget = o.ram_budget;
  in.cost = &cost;
  in.batch_class = batch_class;
  in.disk_direct = disk_direct;
  in.chunk_bytes = disk_direct ? o.copy_chunk_bytes : o.staging_buffer_bytes;
  in.max_slots = o.max_slots;
  in.fixed_slots = o.slots;
  in.fixed_depth = o.prefetch_depth;
  in.serial = o.serial;
  return in;
}

}  // namespace layerstream::sched

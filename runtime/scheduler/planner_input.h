// The planner's input and the disk-path rule, each written once, for every
// caller that asks the planner what an executor would do: the executor
// itself (Executor::planner_input), the minimum-budget search (min_budget.h),
// `plan` (Model::plan), box predictions (runtime/bench) and the runner's
// first-fit baseline. Whoever plans for an executor builds the input here,
// from the ExecutorOptions that executor would get, so that the plan they
// show is the plan it makes.
// Thread safety: plain functions.
#pragma once

#include <vector>

#include "runtime/device/device.h"
#include "runtime/scheduler/cost_model.h"
#include "runtime/scheduler/executor_options.h"
#include "runtime/scheduler/layer.h"
#include "runtime/scheduler/planner.h"

namespace layerstream::sched {

// Whether disk reads land straight in device memory (the direct path: the
// device memory is host-addressable and staging is not forced,
// ExecutorOptions::force_staging) or go through the pinned staging buffers
// (the staged path: every GPU; the host backend with
// DeviceOptions::copies_only, i.e. `--staging always`).
bool disk_reads_direct(const DeviceInfo& device, bool force_staging = false);

// What the rules here need to know of a device that is not open (footprints,
// `plan`, predictions): its backend, and whether its memory is
// host-addressable: on the host backend unless copies_only; never on CUDA.
DeviceInfo device_info_for(BackendKind backend, bool copies_only = false);

// Whether `options` may put layers on the host site (a host policy, or a
// given plan with host or split sites): the layers that can run there are
// then marked LayerSpec::host_ok by their owner before the executor starts.
bool may_use_host_site(const ExecutorOptions& options);

// A block's host compute estimate before it is measured on the host lane,
// as a multiple of its device estimate (CostModel::set_host_factor), for an
// executor with `options` on `device`: ExecutorOptions::host_compute_factor
// when above 0 (the user's override); else 1 on the host backend, where both
// sites run the same CPU kernels on the same cores (the box's host rates are
// its device rates); else 0: unknown until measured, or given per layer from
// a box profile's host rates (runtime/bench/box_predict.h). Every planner of
// an executor (the executor itself, `plan`, `bench --box`) starts from this.
double host_factor_before_measurement(const ExecutorOptions& options, const DeviceInfo& device);

// The per-layer part: bytes, slot spans, file-backed, pins, host_ok, and the
// splittable bytes (the sum of split_tensors) of host_ok layers. Budgets,
// costs and options stay at their defaults.
PlannerInput layer_planner_input(const std::vector<LayerSpec>& layers);

// What an executor with `options` over `layers` plans from, in batch class
// `batch_class` with the costs in `cost` (held by pointer: it must outlive
// the input). `disk_direct`: disk_reads_direct() for its device. The VRAM
// budget is vram_budget less the reserve rounded up to the slot alignment
// (0 when the reserve takes it all); the RAM budget is ram_budget whole: the
// staging buffers are their own allocation, outside it;
// the simulator's chunk is a RAM-tier copy on the direct path, a staging
// buffer on the staged path; slots, depth and serial as the options say.
PlannerInput executor_planner_input(const std::vector<LayerSpec>& layers, const ExecutorOptions& options,
                                    bool disk_direct, const CostModel& cost, int batch_class);

}  // namespace layerstream::sched

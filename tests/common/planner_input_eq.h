// Field-by-field equality of two planner inputs, for the tests that check
// that every caller plans from the executor's own input
// (runtime/scheduler/planner_input.h). The cost models are not compared: each
// side has its own.
#pragma once

#include <gtest/gtest.h>

#include "runtime/scheduler/planner.h"

namespace layerstream::testing {

inline void expect_same_planner_input(const sched::PlannerInput& a, const sched::PlannerInput& b) {
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.spans, b.spans);
  EXPECT_EQ(a.from_file, b.from_file);
  EXPECT_EQ(a.pins, b.pins);
  EXPECT_EQ(a.vram_budget, b.vram_budget);
  EXPECT_EQ(a.ram_budget, b.ram_budget);
  EXPECT_EQ(a.batch_class, b.batch_class);
  EXPECT_EQ(a.disk_direct, b.disk_direct);
  EXPECT_EQ(a.chunk_bytes, b.chunk_bytes);
  EXPECT_EQ(a.max_slots, b.max_slots);
  EXPECT_EQ(a.fixed_slots, b.fixed_slots);
  EXPECT_EQ(a.fixed_depth, b.fixed_depth);
  EXPECT_EQ(a.serial, b.serial);
  EXPECT_EQ(a.host_ok, b.host_ok);
  EXPECT_EQ(a.split_bytes, b.split_bytes);
  EXPECT_EQ(a.host_policy, b.host_policy);
}

}  // namespace layerstream::testing

// GPU test helper: skips (never fails, never passes vacuously) when no CUDA
// device can be used, printing the reason.
#pragma once

#include <gtest/gtest.h>

#include "runtime/device/device.h"

// Use as the first statement of a GPU test or fixture SetUp().
#define LS_REQUIRE_CUDA_DEVICE()                                   \
  do {                                                             \
    ::layerstream::Status _ls_gpu = ::layerstream::cuda_device_available(); \
    if (!_ls_gpu.ok()) GTEST_SKIP() << _ls_gpu.message();          \
  } while (0)

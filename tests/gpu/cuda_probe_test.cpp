// Sanity of the GPU test gate itself: on a machine with a device, the CUDA
// runtime must report a usable device with memory; elsewhere the test skips
// with the runtime's reason.
#include "layerstream/config.h"
#include "tests/common/gpu.h"

#if LAYERSTREAM_HAVE_CUDA_BACKEND
#include <cuda_runtime_api.h>
#endif

namespace layerstream {
namespace {

TEST(CudaProbe, DeviceReportsMemory) {
  LS_REQUIRE_CUDA_DEVICE();
#if LAYERSTREAM_HAVE_CUDA_BACKEND
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  EXPECT_GT(total_b, size_t{1} << 30);
  EXPECT_LE(free_b, total_b);
#endif
}

}  // namespace
}  // namespace layerstream

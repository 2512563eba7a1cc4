// A sticky CUDA error (a kernel writing through a null pointer) must surface
// as a DeviceError that says the context is lost, and every later call must
// fail with that same message instead of unrelated errors.
#include <cuda_runtime_api.h>

#include <string>

#include "runtime/device/device.h"
#include "tests/common/gpu.h"
#include "tests/common/testing.h"

cudaError_t launch_write_through_null(cudaStream_t stream);  // null_write_kernel.cu

namespace layerstream {
namespace {

TEST(CudaContext, IllegalAddressIsReportedAsLostContext) {
  LS_REQUIRE_CUDA_DEVICE();
  DeviceOptions opts;
  opts.backend = BackendKind::kCuda;
  LS_ASSERT_OK_AND_ASSIGN(auto dev, open_device(opts));
  LS_ASSERT_OK_AND_ASSIGN(auto s, dev->create_stream(StreamRole::kCompute));
  ASSERT_EQ(launch_write_through_null(static_cast<cudaStream_t>(s->native_handle())), cudaSuccess);
  Status sync = s->synchronize();
  ASSERT_TRUE(sync.IsDeviceError()) << sync.ToString();
  EXPECT_NE(sync.message().find("context is lost"), std::string::npos) << sync.ToString();
  EXPECT_NE(sync.message().find("cudaErrorIllegalAddress"), std::string::npos) << sync.ToString();
  EXPECT_NE(sync.message().find("cudaStreamSynchronize"), std::string::npos) << sync.ToString();
  auto later = dev->create_stream(StreamRole::kCopy);
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.status().message().find("context is lost"), std::string::npos) << later.status().ToString();
  Status again = s->host_func([] { return Status::OK(); });
  EXPECT_NE(again.message().find("context is lost"), std::string::npos) << again.ToString();
}

}  // namespace
}  // namespace layerstream

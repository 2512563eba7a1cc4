// The CUDA error and timing plumbing under the kernels (issue 20, GPU suite;
// skipped with the reason when no device can be used):
//  - defect 3: a non-sticky error (a failed runtime call checked by the
//    kernels' LS_CUDA_RETURN_IF_ERROR, cudaErrorNotReady from
//    CudaEvent::query) must not stay in the runtime's last-error slot, where
//    the next launch check would report it as the launch's failure;
//  - defect 5: event times composed through the timeline's anchors agree
//    with direct cudaEventElapsedTime over short spans (the long-run
//    precision itself needs an hour of GPU time to observe; what is tested is
//    that composing through many anchors is exact).
#include <chrono>
#include <thread>

#include "kernels/cuda/cuda_check.h"
#include "kernels/kernels.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_event.h"
#include "runtime/device/cuda/cuda_timeline.h"
#include "tests/common/gpu.h"
#include "tests/common/testing.h"
#include "tests/kernels/cuda_spin_kernel.h"

namespace layerstream {
namespace {

// A kernel launch through the kernels' interface on `stream`: a + b of 1024 floats.
Status launch_add(kernels::Kernels& k, Stream& stream, Device& dev) {
  LS_ASSIGN_OR_RETURN(auto arena, dev.create_arena(1 << 20));
  LS_ASSIGN_OR_RETURN(ArenaRegion r, arena->allocate("add", 3 * 4096, 256));
  auto* f = static_cast<float*>(r.ptr);
  LS_RETURN_IF_ERROR(k.add({f, f + 1024, f + 2048, 1024}, stream));
  return stream.synchronize();
}

class CudaRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LS_REQUIRE_CUDA_DEVICE();
    DeviceOptions o;
    o.backend = BackendKind::kCuda;
    auto d = open_device(o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dev_ = std::move(d).value();
    auto k = kernels::make_kernels(BackendKind::kCuda);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    k_ = std::move(k).value();
    auto s = dev_->create_stream(StreamRole::kCompute);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    stream_ = std::move(s).value();
  }
  std::unique_ptr<Device> dev_;
  std::unique_ptr<kernels::Kernels> k_;
  std::unique_ptr<Stream> stream_;
};

TEST_F(CudaRuntimeTest, FailedRuntimeCallLeavesNoErrorForTheNextLaunch) {
  auto failing = []() -> Status {
    LS_CUDA_RETURN_IF_ERROR(cudaSetDevice(1 << 20));  // cudaErrorInvalidDevice: not sticky
    return Status::OK();
  };
  const Status st = failing();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cudaSetDevice"), std::string::npos) << st.message();
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "the check left the error in the last-error slot";
  LS_EXPECT_OK(launch_add(*k_, *stream_, *dev_));
  LS_EXPECT_OK(cuda::context_status());
}

TEST_F(CudaRuntimeTest, EventQueryNotReadyLeavesNoErrorForTheNextLaunch) {
  auto ev = dev_->create_event();
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(testing::launch_spin(static_cast<cudaStream_t>(stream_->native_handle()), 0.3), cudaSuccess);
  LS_ASSERT_OK(stream_->record(**ev));
  auto done = (*ev)->query();
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_FALSE(*done) << "a 0.3 s kernel finished before the query";
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "cudaErrorNotReady was left in the last-error slot";
  auto other = dev_->create_stream(StreamRole::kCompute);
  ASSERT_TRUE(other.ok());
  LS_EXPECT_OK(launch_add(*k_, **other, *dev_));
  LS_ASSERT_OK((*ev)->synchronize());
  auto after = (*ev)->query();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(*after);
}

TEST_F(CudaRuntimeTest, TimesComposedThroughManyAnchorsMatchDirectTiming) {
  auto timeline = cuda::CudaTimeline::create(std::chrono::milliseconds(2));
  ASSERT_TRUE(timeline.ok()) << timeline.status().ToString();
  auto s = static_cast<cudaStream_t>(stream_->native_handle());
  std::vector<std::unique_ptr<cuda::CudaEvent>> evs;
  for (int i = 0; i < 25; ++i) {
    auto e = cuda::create_event(cudaEventDefault, "test event");
    ASSERT_TRUE(e.ok());
    evs.push_back(std::make_unique<cuda::CudaEvent>(std::move(e).value(), *timeline));
    ASSERT_EQ(testing::launch_spin(s, 0.001), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(evs.back()->handle(), s), cudaSuccess);
    evs.back()->mark_recorded();
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_GE((*timeline)->anchors_recorded(), 10);
  for (size_t i = 1; i < evs.size(); ++i) {
    for (size_t j : {size_t{0}, i - 1}) {
      float direct = 0;
      ASSERT_EQ(cudaEventElapsedTime(&direct, evs[j]->handle(), evs[i]->handle()), cudaSuccess);
      LS_ASSERT_OK_AND_ASSIGN(double composed, evs[i]->elapsed_ms_since(*evs[j]));
      EXPECT_NEAR(composed, direct, 0.005) << i << " since " << j;  // event resolution ~0.5 us per reading
      LS_ASSERT_OK_AND_ASSIGN(double back, evs[j]->elapsed_ms_since(*evs[i]));
      EXPECT_NEAR(back, -composed, 1e-9);
    }
  }
}

}  // namespace
}  // namespace layerstream

// StagingRing: allocation, pinning through the callback, acquire/release
// across threads, and a disk -> ring -> "H2D" pipeline.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <thread>

#include "io/reader.h"
#include "io/staging_ring.h"
#include "tests/common/testing.h"
#include "tests/io/io_test_util.h"

namespace layerstream::io {
namespace {

using layerstream::testing::TempDir;

TEST(StagingRingTest, BuffersArePageAlignedDistinctAndPinnedOnce) {
  std::atomic<int> pins{0}, unpins{0};
  StagingRingOptions o;
  o.buffer_bytes = (4 << 20) + 1;  // rounded up to a page
  o.buffer_count = 3;
  o.pin = [&](void* p, size_t n) -> Result<HostBuffer> {
    ++pins;
    EXPECT_EQ(n % 4096, 0u);
    EXPECT_GE(n, size_t{4 << 20} + 1);
    return HostBuffer(p, n, [&](void*) { ++unpins; });
  };
  {
    LS_ASSERT_OK_AND_ASSIGN(auto ring, StagingRing::create(o));
    EXPECT_TRUE(ring->pinned());
    EXPECT_EQ(pins.load(), 3);
    EXPECT_GE(ring->pin_seconds(), 0.0);
    ASSERT_EQ(ring->iovecs().size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(ring->iovecs()[i].iov_base) % 4096, 0u);
      std::memset(ring->iovecs()[i].iov_base, static_cast<int>(i + 1), ring->buffer_bytes());  // writable
      for (size_t j = 0; j < i; ++j) EXPECT_NE(ring->iovecs()[i].iov_base, ring->iovecs()[j].iov_base);
    }
    EXPECT_EQ(unpins.load(), 0);
  }
  EXPECT_EQ(unpins.load(), 3);
}

TEST(StagingRingTest, PinFailureIsReportedWithContext) {
  StagingRingOptions o;
  o.buffer_bytes = 1 << 20;
  o.buffer_count = 2;
  int calls = 0;
  o.pin = [&](void* p, size_t n) -> Result<HostBuffer> {
    if (++calls == 2) return Status::DeviceError("cudaHostRegister: out of memory");
    return HostBuffer(p, n, [](void*) {});
  };
  auto r = StagingRing::create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsDeviceError());
  EXPECT_NE(r.status().message().find("buffer 1"), std::string::npos) << r.status().ToString();
}

TEST(StagingRingTest, RejectsBadSizes) {
  EXPECT_TRUE(StagingRing::create({0, 4, {}}).status().IsInvalidArgument());
  EXPECT_TRUE(StagingRing::create({1 << 20, 0, {}}).status().IsInvalidArgument());
}

TEST(StagingRingTest, AcquireTimesOutAndCloseWakesWaiters) {
  LS_ASSERT_OK_AND_ASSIGN(auto ring, StagingRing::create({1 << 16, 1, {}}));
  auto b = ring->try_acquire();
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(ring->try_acquire().has_value());
  LS_ASSERT_OK_AND_ASSIGN(auto none, ring->acquire(std::chrono::milliseconds(10)));
  EXPECT_FALSE(none.has_value());
  std::thread waiter([&] {
    auto r = ring->acquire();
    EXPECT_TRUE(r.status().IsCancelled()) << r.status().ToString();
  });
  ring->close();
  waiter.join();
  ring->release(b->index);
}

// The disk thread reads chunks into ring buffers; a drain thread (standing in
// for the H2D copy stream) copies them out and releases them.
TEST(StagingRingTest, DiskToRingToDrainPipeline) {
  TempDir dir;
  std::mt19937_64 rng(layerstream::testing::fresh_seed());
  auto data = testing::make_file(dir.file("layer.bin"), (size_t{3} << 20) + 12345, rng);
  const size_t chunk = 256 << 10;
  LS_ASSERT_OK_AND_ASSIGN(auto ring, StagingRing::create({chunk, 3, {}}));
  ReaderOptions o;
  o.queue_depth = 4;
  o.chunk_bytes = 64 << 10;
  LS_ASSERT_OK_AND_ASSIGN(auto reader, open_reader(dir.file("layer.bin"), o));
  LS_ASSERT_OK(reader->register_buffers(ring->iovecs()));

  std::vector<uint8_t> dest(data.size(), 0);
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<unsigned, uint64_t>> filled;  // (buffer, file offset); offset UINT64_MAX = end
  std::thread drain([&] {
    for (;;) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !filled.empty(); });
      auto [idx, off] = filled.front();
      filled.pop_front();
      lock.unlock();
      if (off == UINT64_MAX) return;
      size_t n = std::min<uint64_t>(chunk, data.size() - off);
      std::memcpy(dest.data() + off, ring->iovecs()[idx].iov_base, n);
      ring->release(idx);
    }
  });
  std::map<uint64_t, unsigned> buffer_of;
  uint64_t next = 0;
  size_t outstanding = 0;
  ReadCompletion c[4];
  while (next < data.size() || outstanding > 0) {
    if (next < data.size()) {
      auto b = outstanding == 0 ? ring->acquire() : Result<std::optional<StagingBuffer>>(ring->try_acquire());
      ASSERT_TRUE(b.ok());
      if (b->has_value()) {
        buffer_of[next] = (*b)->index;
        LS_ASSERT_OK(reader->submit({next, chunk, (*b)->data, next}));
        next += chunk;
        ++outstanding;
        continue;
      }
    }
    LS_ASSERT_OK_AND_ASSIGN(size_t got, reader->wait(c, std::chrono::seconds(20)));
    ASSERT_GT(got, 0u);
    for (size_t k = 0; k < got; ++k) {
      LS_ASSERT_OK(c[k].status);
      --outstanding;
      std::lock_guard<std::mutex> lock(mu);
      filled.emplace_back(buffer_of.at(c[k].tag), c[k].tag);
      cv.notify_one();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    filled.emplace_back(0, UINT64_MAX);
    cv.notify_one();
  }
  drain.join();
  EXPECT_EQ(dest, data);
  EXPECT_EQ(ring->free_count(), ring->buffer_count());
}

}  // namespace
}  // namespace layerstream::io

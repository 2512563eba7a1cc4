// Injected faults on every path: short reads, EINTR and EAGAIN are recovered;
// EIO and persistent failures are clear errors naming file, offset and errno;
// nothing hangs and no staging buffer leaks.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/chunked_reader.h"
#include "io/fault_injection.h"
#include "io/reader.h"
#include "io/staging_ring.h"
#include "tests/common/testing.h"
#include "tests/io/io_test_util.h"

namespace layerstream::io {
namespace {

using layerstream::testing::TempDir;
using testing::AlignedBuf;
using testing::make_file;

constexpr size_t kChunk = 64 << 10;

class FaultTest : public ::testing::TestWithParam<IoPath> {
 protected:
  void SetUp() override {
    rng_.seed(layerstream::testing::fresh_seed());
    data_ = make_file(dir_.file("data.bin"), (size_t{2} << 20) + 4096 + 1 + rng_() % 3000, rng_);
  }
  std::unique_ptr<Reader> open() {
    ReaderOptions o;
    o.path = GetParam();
    o.queue_depth = 4;
    o.chunk_bytes = kChunk;
    o.hooks = &inj_;
    auto r = open_reader(dir_.file("data.bin"), o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  TempDir dir_;
  std::mt19937_64 rng_;
  std::vector<uint8_t> data_;
  FaultInjector inj_;
};

TEST_P(FaultTest, ShortReadsAreResubmitted) {
  inj_.add({FaultKind::kShortRead, 0, UINT64_MAX, 1, 6, 0});                  // half of the chunk
  inj_.add({FaultKind::kShortRead, 3 * kChunk, 4 * kChunk, 0, 2, 100});      // unaligned tiny progress
  auto r = open();
  ASSERT_TRUE(r);
  testing::expect_reads_back(*r, data_);
  EXPECT_EQ(inj_.injected(FaultKind::kShortRead), 8u);
}

TEST_P(FaultTest, EintrAndEagainAreRetried) {
  inj_.add({FaultKind::kEintr, 0, UINT64_MAX, 2, 5, 0});
  inj_.add({FaultKind::kEagain, kChunk, UINT64_MAX, 0, 5, 0});
  auto r = open();
  ASSERT_TRUE(r);
  testing::expect_reads_back(*r, data_);
  EXPECT_EQ(inj_.injected(FaultKind::kEintr), 5u);
  EXPECT_EQ(inj_.injected(FaultKind::kEagain), 5u);
}

TEST_P(FaultTest, EioIsAClearErrorNamingFileOffsetErrno) {
  const uint64_t bad = 5 * kChunk;
  inj_.add({FaultKind::kEio, bad, bad + 1, 0, 1, 0});
  auto r = open();
  ASSERT_TRUE(r);
  std::vector<uint8_t> out(data_.size());
  Status s = r->read_span(0, out.size(), out.data());
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("data.bin"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset " + std::to_string(bad)), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("errno " + std::to_string(EIO)), std::string::npos) << s.ToString();
  EXPECT_EQ(r->outstanding(), 0u);
  // The fault was transient: the reader still works.
  testing::expect_reads_back(*r, data_);
}

TEST_P(FaultTest, PersistentEintrGivesUpWithoutHanging) {
  inj_.add({FaultKind::kEintr, 0, UINT64_MAX, 0, UINT64_MAX, 0});
  auto r = open();
  ASSERT_TRUE(r);
  std::vector<uint8_t> out(10000);
  Status s = r->read_span(0, out.size(), out.data());
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("EINTR"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset 0"), std::string::npos) << s.ToString();
}

TEST_P(FaultTest, TruncatedFileIsReportedNotHung) {
  auto r = open();
  ASSERT_TRUE(r);
  ASSERT_EQ(::truncate(dir_.file("data.bin").c_str(), 1 << 20), 0);
  std::vector<uint8_t> out(data_.size());
  Status s = r->read_span(0, out.size(), out.data());
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("end of file"), std::string::npos) << s.ToString();
}

// Faults during a staged pipeline: every request completes (OK or EIO), every
// staging buffer comes back to the ring.
TEST_P(FaultTest, FaultsWhileStagingLeakNoBuffers) {
  inj_.add({FaultKind::kEio, 2 * kChunk, 3 * kChunk, 0, 1, 0});
  inj_.add({FaultKind::kShortRead, 0, UINT64_MAX, 3, 3, 0});
  inj_.add({FaultKind::kEagain, 0, UINT64_MAX, 5, 3, 0});
  auto r = open();
  ASSERT_TRUE(r);
  LS_ASSERT_OK_AND_ASSIGN(auto ring, StagingRing::create({kChunk, 3, {}}));
  LS_ASSERT_OK(r->register_buffers(ring->iovecs()));
  const size_t n = data_.size() / kChunk;
  size_t next = 0, done = 0, failed = 0;
  std::map<uint64_t, unsigned> buffer_of;  // tag -> ring index
  ReadCompletion c[4];
  while (done < n) {
    while (next < n) {
      auto b = ring->try_acquire();
      if (!b) break;
      buffer_of[next] = b->index;
      LS_ASSERT_OK(r->submit({next * kChunk, kChunk, b->data, next}));
      ++next;
    }
    LS_ASSERT_OK_AND_ASSIGN(size_t got, r->wait(c, std::chrono::seconds(20)));
    ASSERT_GT(got, 0u) << "no completion within 20 s";
    for (size_t k = 0; k < got; ++k) {
      unsigned idx = buffer_of.at(c[k].tag);
      if (c[k].status.ok()) {
        EXPECT_EQ(std::memcmp(ring->iovecs()[idx].iov_base, data_.data() + c[k].tag * kChunk, kChunk), 0);
      } else {
        EXPECT_TRUE(c[k].status.IsIOError()) << c[k].status.ToString();
        EXPECT_EQ(c[k].tag, 2u);
        ++failed;
      }
      ring->release(idx);
      ++done;
    }
  }
  EXPECT_EQ(failed, 1u);
  EXPECT_EQ(ring->free_count(), ring->buffer_count());
  EXPECT_EQ(r->outstanding(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Paths, FaultTest, ::testing::Values(IoPath::kUring, IoPath::kPread, IoPath::kBuffered),
                         [](const auto& info) { return testing::path_param_name(info.param); });

}  // namespace
}  // namespace layerstream::io

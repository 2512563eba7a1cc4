// The device interface suite: the same tests against every backend. Host runs
// everywhere; cuda is instantiated too and each test skips with the reason
// when no CUDA device can be used. Copies are always checked by reading back
// through copy_d2h, so the tests hold for devices the CPU cannot address.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/device/device.h"
#include "tests/common/gpu.h"
#include "tests/common/testing.h"

namespace layerstream {

// Names the parameter in test output ("host", not "4-byte object").
void PrintTo(BackendKind kind, std::ostream* os) { *os << name_of(kind); }

namespace {

class DeviceInterfaceTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (GetParam() == BackendKind::kCuda) LS_REQUIRE_CUDA_DEVICE();
    DeviceOptions opts;
    opts.backend = GetParam();
    LS_ASSERT_OK_AND_ASSIGN(device_, open_device(opts));
    ASSERT_EQ(device_->info().backend, GetParam());
    rng_.seed(testing::fresh_seed());
  }

  std::unique_ptr<Stream> stream(StreamRole role = StreamRole::kCompute) {
    auto s = device_->create_stream(role);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::unique_ptr<Event> event() {
    auto e = device_->create_event();
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }
  HostBuffer pinned_random(size_t n) {
    auto b = device_->alloc_pinned(n);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return {};
    auto bytes = testing::random_bytes(n, rng_);
    std::memcpy(b->data(), bytes.data(), n);
    return std::move(b).value();
  }
  // Queues on `copy` a wait for `gate` (the test opens it), the copy of n
  // bytes from `src` to `dst`, then `loaded`: work that waits for `loaded`
  // is held back until the gate opens.
  void gated_copy(Stream& copy, std::promise<void>& gate, void* dst, const void* src, size_t n, Event& loaded) {
    std::shared_future<void> open = gate.get_future().share();
    LS_ASSERT_OK(copy.host_func([open] {
      open.wait();
      return Status::OK();
    }));
    LS_ASSERT_OK(copy.copy_h2d(dst, src, n));
    LS_ASSERT_OK(copy.record(loaded));
  }

  std::unique_ptr<Device> device_;
  std::mt19937_64 rng_;
};

TEST_P(DeviceInterfaceTest, ReportsInfo) {
  const DeviceInfo& info = device_->info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.total_memory_bytes, 0u);
  EXPECT_LE(info.free_memory_bytes, info.total_memory_bytes);
  EXPECT_GE(info.copy_engines, 1);
  EXPECT_EQ(info.host_addressable, GetParam() == BackendKind::kHost);
}

TEST_P(DeviceInterfaceTest, WorkWithinAStreamRunsInOrder) {
  constexpr size_t kN = 64 << 10;
  LS_ASSERT_OK_AND_ASSIGN(auto arena, device_->create_arena(4 * kN));
  LS_ASSERT_OK_AND_ASSIGN(auto r0, arena->allocate("r0", kN));
  LS_ASSERT_OK_AND_ASSIGN(auto r1, arena->allocate("r1", kN));
  HostBuffer a = pinned_random(kN), b = pinned_random(kN), out = pinned_random(2 * kN);
  auto s = stream();
  // Each result is right only if the copies ran in the order enqueued.
  LS_ASSERT_OK(s->copy_h2d(r0.ptr, a.data(), kN));
  LS_ASSERT_OK(s->copy_d2d(r1.ptr, r0.ptr, kN));
  LS_ASSERT_OK(s->copy_h2d(r0.ptr, b.data(), kN));
  LS_ASSERT_OK(s->copy_d2h(out.data(), r1.ptr, kN));
  LS_ASSERT_OK(s->copy_d2h(static_cast<char*>(out.data()) + kN, r0.ptr, kN));
  // Host functions interleaved with the copies run in order too.
  std::vector<int> seen;
  for (int i = 0; i < 50; ++i) {
    LS_ASSERT_OK(s->host_func([&seen, i] {
      seen.push_back(i);
      return Status::OK();
    }));
  }
  LS_ASSERT_OK(s->synchronize());
  EXPECT_EQ(std::memcmp(out.data(), a.data(), kN), 0) << "d2d ran after the second h2d";
  EXPECT_EQ(std::memcmp(static_cast<char*>(out.data()) + kN, b.data(), kN), 0);
  ASSERT_EQ(seen.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(seen[i], i);
}

TEST_P(DeviceInterfaceTest, CrossStreamWaitHoldsBackDependentWork) {
  constexpr size_t kN = 256 << 10;
  LS_ASSERT_OK_AND_ASSIGN(auto arena, device_->create_arena(kN));
  LS_ASSERT_OK_AND_ASSIGN(auto r, arena->allocate("slot", kN));
  HostBuffer src = pinned_random(kN), out = pinned_random(kN);
  auto copy = stream(StreamRole::kCopy);
  auto compute = stream(StreamRole::kCompute);
  auto loaded = event(), consumed = event();
  // The copy stream is held at a gate the test opens; the compute stream must
  // not read the slot before the copy's event.
  std::promise<void> gate;
  gated_copy(*copy, gate, r.ptr, src.data(), kN, *loaded);
  ASSERT_FALSE(HasFatalFailure());
  LS_ASSERT_OK(compute->wait(*loaded));
  LS_ASSERT_OK(compute->copy_d2h(out.data(), r.ptr, kN));
  LS_ASSERT_OK(compute->record(*consumed));
  LS_ASSERT_OK_AND_ASSIGN(bool done_early, consumed->query());
  EXPECT_FALSE(done_early) << "compute stream ran past a wait on an event not yet reached";
  gate.set_value();
  LS_ASSERT_OK(consumed->synchronize());
  LS_ASSERT_OK_AND_ASSIGN(bool loaded_done, loaded->query());
  EXPECT_TRUE(loaded_done);
  EXPECT_EQ(std::memcmp(out.data(), src.data(), kN), 0);
  LS_ASSERT_OK(copy->synchronize());
  LS_ASSERT_OK(compute->synchronize());
}

TEST_P(DeviceInterfaceTest, EventTimesAreMonotonic) {
  auto s = stream();
  auto other = stream(StreamRole::kCopy);
  std::vector<std::unique_ptr<Event>> evs;
  for (int i = 0; i < 6; ++i) {
    evs.push_back(event());
    LS_ASSERT_OK(s->record(*evs.back()));
    LS_ASSERT_OK(s->host_func([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return Status::OK();
    }));
  }
  // An event on another stream that waits for the last one completes no earlier.
  auto after = event();
  LS_ASSERT_OK(other->wait(*evs.back()));
  LS_ASSERT_OK(other->record(*after));
  LS_ASSERT_OK(after->synchronize());
  LS_ASSERT_OK(s->synchronize());
  double prev = 0;
  for (size_t i = 1; i < evs.size(); ++i) {
    LS_ASSERT_OK_AND_ASSIGN(double ms, evs[i]->elapsed_ms_since(*evs[0]));
    EXPECT_GE(ms, prev) << "event " << i;
    prev = ms;
    LS_ASSERT_OK_AND_ASSIGN(double back, evs[0]->elapsed_ms_since(*evs[i]));
    EXPECT_DOUBLE_EQ(back, -ms);
  }
  LS_ASSERT_OK_AND_ASSIGN(double cross, after->elapsed_ms_since(*evs.back()));
  EXPECT_GE(cross, 0.0);
  // Timing needs recorded events.
  auto never = event();
  LS_EXPECT_OK(never->synchronize());
  EXPECT_FALSE(never->elapsed_ms_since(*evs[0]).ok());
}

TEST_P(DeviceInterfaceTest, CopiesOfRandomSizesAndOffsetsAreExact) {
  constexpr size_t kDev = 4 << 20;
  LS_ASSERT_OK_AND_ASSIGN(auto arena, device_->create_arena(kDev));
  LS_ASSERT_OK_AND_ASSIGN(auto r, arena->allocate("all", kDev, 4096));
  char* dev = static_cast<char*>(r.ptr);
  HostBuffer src = pinned_random(kDev);
  std::vector<uint8_t> model(kDev);
  std::memcpy(model.data(), src.data(), kDev);
  auto s = stream(StreamRole::kCopy);
  LS_ASSERT_OK(s->copy_h2d(dev, src.data(), kDev));
  std::vector<HostBuffer> outs;
  std::vector<std::pair<size_t, size_t>> checks;  // (device offset, bytes) to compare with outs[i]
  for (int i = 0; i < 60; ++i) {
    const size_t n = 1 + rng_() % (256 << 10);
    const int op = static_cast<int>(rng_() % 3);
    if (op == 0) {  // h2d from a random offset of fresh random host data
      HostBuffer h = pinned_random(kDev);
      const size_t so = rng_() % (kDev - n), d = rng_() % (kDev - n);
      LS_ASSERT_OK(s->copy_h2d(dev + d, static_cast<char*>(h.data()) + so, n));
      std::memcpy(model.data() + d, static_cast<char*>(h.data()) + so, n);
      LS_ASSERT_OK(s->synchronize());  // h goes out of scope
    } else if (op == 1) {  // d2d between non-overlapping ranges
      size_t a = 0, b = 0;
      do {
        a = rng_() % (kDev - n);
        b = rng_() % (kDev - n);
      } while ((a < b ? b - a : a - b) < n);
      LS_ASSERT_OK(s->copy_d2d(dev + b, dev + a, n));
      std::memmove(model.data() + b, model.data() + a, n);
    } else {  // d2h of a random range, checked against the model at this point
      const size_t a = rng_() % (kDev - n);
      HostBuffer out = pinned_random(n);
      LS_ASSERT_OK(s->copy_d2h(out.data(), dev + a, n));
      LS_ASSERT_OK(s->synchronize());
      ASSERT_EQ(std::memcmp(out.data(), model.data() + a, n), 0) << "d2h of " << n << " B at offset " << a;
    }
  }
  HostBuffer all = pinned_random(kDev);
  LS_ASSERT_OK(s->copy_d2h(all.data(), dev, kDev));
  LS_ASSERT_OK(s->synchronize());
  EXPECT_EQ(std::memcmp(all.data(), model.data(), kDev), 0);
}

TEST_P(DeviceInterfaceTest, CopiesOutsideTheArenaAreRefused) {
  LS_ASSERT_OK_AND_ASSIGN(auto arena, device_->create_arena(1 << 16));
  LS_ASSERT_OK_AND_ASSIGN(auto r, arena->allocate("r", 1 << 16));
  HostBuffer h = pinned_random(1 << 17);
  auto s = stream();
  Status past = s->copy_h2d(static_cast<char*>(r.ptr) + 1, h.data(), 1 << 16);
  EXPECT_TRUE(past.IsInvalidArgument()) << past.ToString();
  EXPECT_NE(past.message().find("past the end"), std::string::npos) << past.ToString();
  EXPECT_TRUE(s->copy_d2h(h.data(), h.data(), 16).IsInvalidArgument());
  EXPECT_TRUE(s->copy_d2d(r.ptr, static_cast<char*>(r.ptr) + 8, 16).IsInvalidArgument());
  LS_EXPECT_OK(s->synchronize());  // refused calls enqueue nothing and poison nothing
}

TEST_P(DeviceInterfaceTest, BudgetRefusalNamesTheNumbers) {
  LS_ASSERT_OK_AND_ASSIGN(auto arena, device_->create_arena(1 << 20));
  LS_ASSERT_OK_AND_ASSIGN(auto a, arena->allocate("layer0", 600 << 10));
  auto b = arena->allocate("layer1", 600 << 10);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(b.status().IsOutOfBudget());
  const std::string& m = b.status().message();
  EXPECT_NE(m.find("layer1"), std::string::npos) << m;
  EXPECT_NE(m.find("614400 B"), std::string::npos) << m;   // the request
  EXPECT_NE(m.find("1048576 B"), std::string::npos) << m;  // the budget
  EXPECT_NE(m.find("in use 600.00 KiB (614400 B)"), std::string::npos) << m;
  EXPECT_EQ(arena->used(), 600u << 10);
  arena->free(a);
  // The device refuses an arena larger than it has, naming the request.
  const uint64_t too_big = device_->info().total_memory_bytes * 2;
  auto huge = device_->create_arena(too_big);
  ASSERT_FALSE(huge.ok());
  EXPECT_TRUE(huge.status().IsOutOfBudget()) << huge.status().ToString();
  EXPECT_NE(huge.status().message().find(std::to_string(too_big)), std::string::npos) << huge.status().ToString();
}

TEST_P(DeviceInterfaceTest, MemoryIsReusableAfterFree) {
  constexpr size_t kSlot = 128 << 10;
  LS_ASSERT_OK_AND_ASSIGN(auto arena, device_->create_arena(2 * kSlot));
  auto s = stream();
  for (int round = 0; round < 5; ++round) {
    // Slots of varying size fill the arena, hold data, and are handed back.
    const size_t n = kSlot + (rng_() % kSlot);
    LS_ASSERT_OK_AND_ASSIGN(auto slot, arena->allocate("slot", n));
    EXPECT_EQ(slot.offset, 0u) << "freed memory was not reused in round " << round;
    HostBuffer in = pinned_random(n), out = pinned_random(n);
    LS_ASSERT_OK(s->copy_h2d(slot.ptr, in.data(), n));
    LS_ASSERT_OK(s->copy_d2h(out.data(), slot.ptr, n));
    LS_ASSERT_OK(s->synchronize());
    EXPECT_EQ(std::memcmp(in.data(), out.data(), n), 0);
    EXPECT_FALSE(arena->allocate("too much", 2 * kSlot - n + 1).ok());
    arena->free(slot);
    EXPECT_EQ(arena->used(), 0u);
  }
}

TEST_P(DeviceInterfaceTest, HostFuncErrorIsSticky) {
  auto s = stream();
  std::atomic<int> ran_after{0};
  LS_ASSERT_OK(s->host_func([] { return Status::Corruption("checksum mismatch in layer 3"); }));
  Status after = s->host_func([&ran_after] {
    ran_after.fetch_add(1);
    return Status::OK();
  });
  Status first = s->synchronize();
  EXPECT_EQ(first.code(), StatusCode::kCorruption) << first.ToString();
  EXPECT_NE(first.message().find("checksum mismatch in layer 3"), std::string::npos) << first.ToString();
  // Still failed on the next call; work enqueued after the failure does not run.
  Status again = s->synchronize();
  EXPECT_EQ(again.code(), StatusCode::kCorruption) << again.ToString();
  Status later = s->host_func([&ran_after] {
    ran_after.fetch_add(1);
    return Status::OK();
  });
  Status third = s->synchronize();
  EXPECT_FALSE(third.ok());
  EXPECT_EQ(ran_after.load(), 0) << "work ran after a sticky error (enqueue said " << after.ToString() << ", "
                                 << later.ToString() << ")";
  // Another stream is unaffected.
  auto fresh = stream();
  LS_EXPECT_OK(fresh->host_func([] { return Status::OK(); }));
  LS_EXPECT_OK(fresh->synchronize());
}

// set_run_on_caller (the executor's resident passes on the host backend):
// work enqueued after it runs on the enqueuing thread, after anything queued
// before the switch, in order; a wait blocks the caller until its event; a
// failure is sticky as on the worker; switching off hands work back to the
// stream's thread. Backends that do not honour it say so and change nothing.
TEST_P(DeviceInterfaceTest, RunOnCallerKeepsOrderWaitsAndStickyErrors) {
  constexpr size_t kN = 64 << 10;
  LS_ASSERT_OK_AND_ASSIGN(auto arena, device_->create_arena(kN));
  LS_ASSERT_OK_AND_ASSIGN(auto r, arena->allocate("slot", kN));
  HostBuffer src = pinned_random(kN), out = pinned_random(kN);
  auto s = stream();
  std::vector<int> seen;
  LS_ASSERT_OK(s->host_func([&seen] {  // queued before the switch: runs first
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    seen.push_back(0);
    return Status::OK();
  }));
  const bool honoured = s->set_run_on_caller(true);
  EXPECT_EQ(honoured, GetParam() == BackendKind::kHost);
  std::thread::id ran_on;
  LS_ASSERT_OK(s->host_func([&] {
    seen.push_back(1);
    ran_on = std::this_thread::get_id();
    return Status::OK();
  }));
  if (honoured) {
    EXPECT_EQ(seen, (std::vector<int>{0, 1})) << "on the caller: done when host_func returns, after earlier work";
    EXPECT_EQ(ran_on, std::this_thread::get_id());
  }
  // A wait on another stream's event holds the caller until the event.
  auto copy = stream(StreamRole::kCopy);
  auto loaded = event();
  std::promise<void> gate;
  gated_copy(*copy, gate, r.ptr, src.data(), kN, *loaded);
  ASSERT_FALSE(HasFatalFailure());
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.set_value();
  });
  LS_ASSERT_OK(s->wait(*loaded));
  LS_ASSERT_OK(s->copy_d2h(out.data(), r.ptr, kN));
  LS_ASSERT_OK(s->synchronize());
  opener.join();
  EXPECT_EQ(std::memcmp(out.data(), src.data(), kN), 0) << "read the slot before the copy's event";
  // Switched off: work goes back to the stream's own thread.
  EXPECT_EQ(s->set_run_on_caller(false), honoured);
  LS_ASSERT_OK(s->host_func([&] {
    ran_on = std::this_thread::get_id();
    return Status::OK();
  }));
  LS_ASSERT_OK(s->synchronize());
  EXPECT_NE(ran_on, std::this_thread::get_id());
  // Sticky errors on the caller as on the worker.
  (void)s->set_run_on_caller(true);
  int ran_after = 0;
  LS_ASSERT_OK(s->host_func([] { return Status::Corruption("bad block 7"); }));
  (void)s->host_func([&ran_after] {
    ++ran_after;
    return Status::OK();
  });
  Status st = s->synchronize();
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_EQ(ran_after, 0) << "work ran after a sticky error";
}

TEST_P(DeviceInterfaceTest, RegisteredHostMemoryCopies) {
  constexpr size_t kN = 64 << 10;
  std::vector<uint8_t> mine = testing::random_bytes(kN, rng_);
  LS_ASSERT_OK_AND_ASSIGN(HostBuffer reg, device_->register_host(mine.data(), kN));
  EXPECT_EQ(reg.data(), mine.data());
  LS_ASSERT_OK_AND_ASSIGN(auto arena, device_->create_arena(kN));
  LS_ASSERT_OK_AND_ASSIGN(auto r, arena->allocate("r", kN));
  std::vector<uint8_t> back(kN);
  auto s = stream(StreamRole::kCopy);
  LS_ASSERT_OK(s->copy_h2d(r.ptr, mine.data(), kN));
  LS_ASSERT_OK(s->copy_d2h(back.data(), r.ptr, kN));
  LS_ASSERT_OK(s->synchronize());
  EXPECT_EQ(back, mine);
  EXPECT_TRUE(device_->register_host(nullptr, 16).status().IsInvalidArgument());
}

std::string backend_param_name(const ::testing::TestParamInfo<BackendKind>& info) {
  return std::string(name_of(info.param));
}

// The same suite is built twice: test_device_interface runs it on the host
// backend (labels unit, tsan) and test_device_interface_cuda on the cuda
// backend (label gpu: skipped with the reason when no device is present).
#if LS_DEVICE_TEST_CUDA
INSTANTIATE_TEST_SUITE_P(Backends, DeviceInterfaceTest, ::testing::Values(BackendKind::kCuda), backend_param_name);
#else
INSTANTIATE_TEST_SUITE_P(Backends, DeviceInterfaceTest, ::testing::Values(BackendKind::kHost), backend_param_name);

// Backend selection (not per backend).
TEST(DeviceSelection, ParsesBackendNames) {
  for (BackendKind k : {BackendKind::kAuto, BackendKind::kHost, BackendKind::kCuda}) {
    LS_ASSERT_OK_AND_ASSIGN(BackendKind back, backend_from_name(name_of(k)));
    EXPECT_EQ(back, k);
  }
  auto bad = backend_from_name("tpu");
  EXPECT_TRUE(bad.status().IsInvalidArgument());
  EXPECT_NE(bad.status().message().find("tpu"), std::string::npos);
}

TEST(DeviceSelection, AutoPicksCudaExactlyWhenADeviceIsAvailable) {
  DeviceOptions opts;
  LS_ASSERT_OK_AND_ASSIGN(auto dev, open_device(opts));
  const bool have_cuda = cuda_device_available().ok();
  EXPECT_EQ(dev->info().backend, have_cuda ? BackendKind::kCuda : BackendKind::kHost);
  if (!have_cuda) {
    opts.backend = BackendKind::kCuda;
    auto cuda = open_device(opts);
    ASSERT_FALSE(cuda.ok());
    EXPECT_NE(cuda.status().message().find("no CUDA device"), std::string::npos) << cuda.status().ToString();
  }
}

TEST(DeviceSelection, HostRejectsBadSimLink) {
  DeviceOptions opts;
  opts.backend = BackendKind::kHost;
  opts.sim_link_gbps = -1;
  EXPECT_TRUE(open_device(opts).status().IsInvalidArgument());
}
#endif  // LS_DEVICE_TEST_CUDA

}  // namespace
}  // namespace layerstream

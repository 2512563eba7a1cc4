// Arena bookkeeping on plain memory: alignment, first fit, merging on free,
// and refusal past the budget, checked against a model of what must hold.
#include <algorithm>
#include <cstdlib>
#include <random>
#include <vector>

#include "runtime/device/arena.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

std::unique_ptr<Arena> make_arena(uint64_t bytes) {
  void* base = std::aligned_alloc(4096, bytes);
  return std::make_unique<Arena>(base, bytes, [](void* p) { std::free(p); });
}

TEST(Arena, AlignsRegionsAndNeverOverlaps) {
  std::mt19937_64 rng(testing::fresh_seed());
  auto arena = make_arena(1 << 20);
  std::vector<ArenaRegion> live;
  for (int i = 0; i < 200; ++i) {
    const uint64_t align = uint64_t{1} << (rng() % 13);
    const uint64_t bytes = 1 + rng() % 20000;
    auto r = arena->allocate("r", bytes, align);
    if (!r.ok()) {
      ASSERT_TRUE(r.status().IsOutOfBudget()) << r.status().ToString();
      // Free a random half and go on.
      std::shuffle(live.begin(), live.end(), rng);
      for (size_t k = 0; k < live.size() / 2; ++k) arena->free(live[k]);
      live.erase(live.begin(), live.begin() + live.size() / 2);
      continue;
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r->ptr) % align, 0u);
    EXPECT_EQ(static_cast<char*>(r->ptr), static_cast<char*>(arena->base()) + r->offset);
    EXPECT_LE(r->offset + r->bytes, arena->budget());
    for (const auto& o : live) {
      EXPECT_TRUE(r->offset + r->bytes <= o.offset || o.offset + o.bytes <= r->offset)
          << "regions overlap: [" << r->offset << ", +" << r->bytes << ") and [" << o.offset << ", +" << o.bytes << ")";
    }
    live.push_back(*r);
    uint64_t sum = 0;
    for (const auto& o : live) sum += o.bytes;
    EXPECT_EQ(arena->used(), sum);
  }
  for (const auto& o : live) arena->free(o);
  EXPECT_EQ(arena->used(), 0u);
  // Everything merged back into one range.
  EXPECT_EQ(arena->largest_free(), arena->budget());
}

TEST(Arena, FirstFitReusesFreedHoleAndMergesNeighbours) {
  auto arena = make_arena(4096 * 4);
  std::vector<ArenaRegion> r;
  for (int i = 0; i < 4; ++i) {
    LS_ASSERT_OK_AND_ASSIGN(auto x, arena->allocate("q" + std::to_string(i), 4096, 4096));
    EXPECT_EQ(x.offset, 4096u * i);
    r.push_back(x);
  }
  EXPECT_TRUE(arena->allocate("full", 1).status().IsOutOfBudget());
  arena->free(r[1]);
  arena->free(r[2]);
  // The two freed neighbours merged: 8192 contiguous bytes at offset 4096.
  LS_ASSERT_OK_AND_ASSIGN(auto big, arena->allocate("big", 8192, 4096));
  EXPECT_EQ(big.offset, 4096u);
  arena->free(big);
  arena->free(r[0]);
  arena->free(r[3]);
  LS_ASSERT_OK_AND_ASSIGN(auto all, arena->allocate("all", 4096 * 4, 4096));
  EXPECT_EQ(all.offset, 0u);
}

TEST(Arena, RefusalNamesRequestBudgetUsedAndLargestFree) {
  auto arena = make_arena(1 << 20);
  LS_ASSERT_OK_AND_ASSIGN(auto a, arena->allocate("weights", 700000));
  auto r = arena->allocate("kv_cache", 400000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsOutOfBudget());
  EXPECT_TRUE(testing::contains_all(r.status().message(), {"kv_cache", "400000 B", "1048576 B",
                                                            "in use 683.59 KiB (700000 B)", "largest free range"}));
  EXPECT_EQ(arena->used(), 700000u);
  arena->free(a);
}

TEST(Arena, RejectsBadArguments) {
  auto arena = make_arena(4096);
  EXPECT_TRUE(arena->allocate("zero", 0).status().IsInvalidArgument());
  EXPECT_TRUE(arena->allocate("odd", 16, 48).status().IsInvalidArgument());
  EXPECT_TRUE(arena->allocate("huge", ~uint64_t{0}).status().IsOutOfBudget());
  EXPECT_EQ(arena->used(), 0u);
}

}  // namespace
}  // namespace layerstream

// Hybrid execution in the cost model, simulator and planner: a host-site
// layer takes no window and no link time but its host compute time; the
// planner puts a layer on the host when that beats streaming it, and keeps it
// streaming when the host is slow; `all` puts every non-resident candidate
// on the host; without host costs (factor 0, nothing measured) nothing moves.
#include <gtest/gtest.h>

#include "runtime/scheduler/planner.h"
#include "runtime/scheduler/simulator.h"

namespace layerstream::sched {
namespace {

struct HybridSetup {
  CostModel cost{8};
  PlannerInput in;
  HybridSetup(double device_ms, double link_gbps) {
    for (int i = 0; i < 8; ++i) {
      in.bytes.push_back(16 << 20);
      in.spans.push_back(16 << 20);
      in.from_file.push_back(false);
      in.pins.push_back(std::nullopt);
      in.host_ok.push_back(true);
      cost.record_compute(i, 0, device_ms * 1e-3);
    }
    cost.set_link_bw(link_gbps * 1e9);
    in.vram_budget = 3 * (16ull << 20);  // one resident + a 2-slot window, or three residents
    in.ram_budget = 1ull << 30;
    in.cost = &cost;
  }
};

TEST(HybridPlanner, HostSiteWhenStreamingIsSlowerThanHostCompute) {
  HybridSetup s(/*device_ms=*/1.0, /*link_gbps=*/1.0);  // streaming 16 MiB: ~16.8 ms; host: 4 ms
  for (int i = 0; i < 8; ++i) s.cost.record_host_compute(i, 0, 4e-3);
  s.in.host_policy = HostPolicy::kNever;
  auto dev = make_plan(s.in);
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(dev->count_site(Site::kHost), 0);
  s.in.host_policy = HostPolicy::kChoose;
  auto p = make_plan(s.in);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->count_site(Site::kHost) + p->count(Tier::kResident), 8) << site_map(*p);
  EXPECT_FALSE(p->streams_anything()) << site_map(*p);
  EXPECT_LT(p->predicted_pass_s, dev->predicted_pass_s / 2);
  // The simulator: host layers cost their host time, residents their device time.
  const double want = p->count_site(Site::kHost) * 4e-3 + p->count(Tier::kResident) * 1e-3;
  EXPECT_NEAR(p->predicted_pass_s, want, 1e-9);
}

TEST(HybridPlanner, StreamsWhenHostComputeIsSlow) {
  HybridSetup s(/*device_ms=*/20.0, /*link_gbps=*/1.0);  // streaming hides behind 20 ms of compute
  for (int i = 0; i < 8; ++i) s.cost.record_host_compute(i, 0, 200e-3);
  s.in.host_policy = HostPolicy::kChoose;
  auto p = make_plan(s.in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->count_site(Site::kHost), 0) << site_map(*p);
  s.in.host_policy = HostPolicy::kAll;
  auto h = make_plan(s.in);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->count_site(Site::kHost) + h->count(Tier::kResident), 8) << site_map(*h);
  EXPECT_GT(h->predicted_pass_s, p->predicted_pass_s);
}

TEST(HybridPlanner, UnknownHostCostKeepsEverythingOnTheDevice) {
  HybridSetup s(1.0, 1.0);
  s.in.host_policy = HostPolicy::kChoose;
  auto p = make_plan(s.in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->count_site(Site::kHost), 0);
  EXPECT_TRUE(p->sites.empty());
  s.cost.set_host_factor(1.0);  // host as fast as the device: no link time wins
  p = make_plan(s.in);
  ASSERT_TRUE(p.ok());
  EXPECT_GT(p->count_site(Site::kHost), 0);
}

TEST(HybridPlanner, CrossingsAreCharged) {
  CostModel cost(3);
  for (int i = 0; i < 3; ++i) {
    cost.record_compute(i, 0, 1e-3);
    cost.record_host_compute(i, 0, 2e-3);
  }
  cost.set_crossing_s(0, 0.5e-3);
  const std::vector<uint64_t> b(3, 4096);
  auto sl = make_sim_layers(b, b, {Tier::kResident, Tier::kRam, Tier::kResident}, cost, 0, false,
                            {Site::kDevice, Site::kHost, Site::kDevice});
  SimOptions o;
  o.slots = 0;
  SimResult r = simulate(sl, o);
  EXPECT_NEAR(r.pass_s, 1e-3 + (2e-3 + 2 * 0.5e-3) + 1e-3, 1e-12);
}

}  // namespace
}  // namespace layerstream::sched

namespace layerstream::sched {
namespace {

// Split sites (Site::kSplit): with the link and the host about equally slow
// and the device fast (a GPU box in decode), splitting a layer's rows lets
// both work at once; the fraction makes both halves finish together; on a
// box whose "device" shares the host's cores no split is ever chosen.
struct SplitSetup : HybridSetup {
  SplitSetup(double device_ms, double link_gbps, double host_ms) : HybridSetup(device_ms, link_gbps) {
    for (int i = 0; i < 8; ++i) {
      cost.record_host_compute(i, 0, host_ms * 1e-3);
      in.split_bytes.push_back(in.bytes[i]);  // every byte is in splittable matmuls
    }
    in.host_policy = HostPolicy::kChoose;
  }
};

TEST(SplitPlanner, BalancedFractionMakesBothHalvesFinishTogether) {
  const double link_ms = (16 << 20) / 4e9 * 1e3;  // ~4.19 ms for the whole layer at 4 GB/s
  SplitSetup s(/*device_ms=*/0.1, /*link_gbps=*/4.0, /*host_ms=*/2 * link_ms);
  const double f = balanced_split(s.in, 3);
  EXPECT_NEAR(f, 2.0 / 3.0, 1e-3);  // f x link = (1 - f) x host
  // Device compute longer than the link: the device half is its compute.
  SplitSetup c(/*device_ms=*/10.0, /*link_gbps=*/40.0, /*host_ms=*/30.0);
  EXPECT_NEAR(balanced_split(c.in, 3), 0.75, 1e-3);  // f x 10 = (1 - f) x 30
  // Not splittable, or no host cost: 0.
  s.in.split_bytes[3] = 0;
  EXPECT_EQ(balanced_split(s.in, 3), 0);
}

TEST(SplitPlanner, SplitsWhenLinkAndHostBothLimit) {
  const double link_ms = (16 << 20) / 4e9 * 1e3;
  SplitSetup s(/*device_ms=*/0.1, /*link_gbps=*/4.0, /*host_ms=*/link_ms);
  auto p = make_plan(s.in);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_GT(p->count_site(Site::kSplit), 0) << site_map(*p);
  ASSERT_EQ(p->device_rows.size(), 8u);
  for (int i = 0; i < 8; ++i)
    if (p->site(i) == Site::kSplit) {
      EXPECT_EQ(p->tiers[i], Tier::kRam);
      EXPECT_NEAR(p->device_rows[i], 0.5, 0.01);
    }
  // Streaming only and host only each cost ~link_ms per non-resident layer;
  // the split plan predicts well under either.
  SplitSetup h(0.1, 4.0, link_ms);
  h.in.host_policy = HostPolicy::kAll;
  auto all_host = make_plan(h.in);
  ASSERT_TRUE(all_host.ok());
  h.in.host_policy = HostPolicy::kNever;
  auto dev = make_plan(h.in);
  ASSERT_TRUE(dev.ok());
  EXPECT_LT(p->predicted_pass_s, 0.8 * std::min(all_host->predicted_pass_s, dev->predicted_pass_s))
      << site_map(*p) << " vs host " << site_map(*all_host) << " and device " << site_map(*dev);
  // The simulator charges a split layer its device bytes on the link.
  std::vector<SimLayer> sl = make_sim_layers(s.in.bytes, s.in.spans, p->tiers, s.cost, 0, false, p->sites,
                                             p->device_rows, s.in.split_bytes);
  for (int i = 0; i < 8; ++i)
    if (p->site(i) == Site::kSplit) {
      EXPECT_NEAR(sl[i].link_s, p->device_rows[i] * link_ms * 1e-3, 1e-6);
      EXPECT_NEAR(sl[i].compute_s, std::max(p->device_rows[i] * 0.1e-3, (1 - p->device_rows[i]) * link_ms * 1e-3), 1e-9);
    }
}

TEST(SplitPlanner, NoSplitWhenHalvesShareTheCores) {
  const double link_ms = (16 << 20) / 4e9 * 1e3;
  SplitSetup s(0.1, 4.0, link_ms);
  s.cost.set_shared_compute(true);  // the host backend: "device" compute is the same CPU
  EXPECT_EQ(balanced_split(s.in, 3), 0);
  auto p = make_plan(s.in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->count_site(Site::kSplit), 0) << site_map(*p);
  EXPECT_NEAR(s.cost.split_compute_s(3, 0, 0.25), 0.25 * 0.1e-3 + 0.75 * link_ms * 1e-3, 1e-12);
}

// Shared cores (the host backend): a sample of either site is a sample of
// the layer's one compute cost, so noise on one site's samples (a copy beside
// a host-site layer, a busy neighbour) cannot by itself move layers between
// sites: they differ only by the link and the crossings.
TEST(HybridCosts, SharedCoresPoolBothSitesSamples) {
  CostModel c(2);
  c.set_shared_compute(true);
  c.record_compute(0, 0, 2e-3);
  c.record_host_compute(0, 0, 4e-3);  // the same layer, measured slower on the host lane
  EXPECT_GT(c.compute_s(0, 0), 2e-3);
  EXPECT_LT(c.compute_s(0, 0), 4e-3);
  EXPECT_EQ(c.host_compute_s(0, 0), c.compute_s(0, 0));
  c.record_host_compute(1, 0, 3e-3);  // measured on the host site only
  EXPECT_EQ(c.compute_s(1, 0), 3e-3);
  EXPECT_EQ(c.host_compute_s(1, 0), 3e-3);
  EXPECT_TRUE(c.host_measured(1, 0));
  // A split layer's halves stay samples of their own site.
  c.record_split(0, 1, 0.5, 1e-3, 3e-3);
  EXPECT_EQ(c.host_compute_s(0, 1), c.compute_s(0, 1));  // the pool (class 0) still answers
  CostModel split(1);
  split.set_shared_compute(true);
  split.record_split(0, 0, 0.5, 1e-3, 3e-3);
  EXPECT_EQ(split.compute_s(0, 0), 2e-3);
  EXPECT_EQ(split.host_compute_s(0, 0), 6e-3);
  // Separate hardware (a GPU): each site keeps its own.
  CostModel g(1);
  g.record_compute(0, 0, 2e-3);
  g.record_host_compute(0, 0, 4e-3);
  EXPECT_EQ(g.compute_s(0, 0), 2e-3);
  EXPECT_EQ(g.host_compute_s(0, 0), 4e-3);
}

}  // namespace
}  // namespace layerstream::sched

namespace layerstream::sched {
namespace {

// The bytes a split layer's device half needs: rows [0, r) of each split
// tensor (r = f x rows rounded to 32) and every byte outside them.
TEST(SplitRanges, RowsOfEachTensorAndEverythingElse) {
  EXPECT_EQ(split_rows(192, 0.5), 96);
  EXPECT_EQ(split_rows(192, 0.2), 32);   // 38.4 -> 32
  EXPECT_EQ(split_rows(64, 0.3), 32);    // 19.2 rows round to one 32-row group
  EXPECT_EQ(split_rows(32, 0.4), 0);
  EXPECT_EQ(split_rows(100, 0.99), 96);
  EXPECT_EQ(split_rows(20, 0.9), 20);     // one 32-row group, clamped to the rows there are
  EXPECT_EQ(split_rows(100, 1.0), 100);
  LayerSpec l;
  l.bytes = 1000;
  // [0,100) norm | [100,500) 8 rows of 50 B | [500,520) bias | [520,1000) 96 rows of 5 B
  l.split_tensors = {{100, 400, 8}, {520, 480, 96}};
  auto r = split_device_ranges(l, 0.5);
  // split_rows(8, .5) = 0 (rounds to 32-row groups), split_rows(96, .5) = 64
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], (std::pair<uint64_t, uint64_t>{0, 100}));
  EXPECT_EQ(r[1], (std::pair<uint64_t, uint64_t>{500, 20 + 64 * 5}));
  EXPECT_EQ(split_device_bytes(l, 0.5), 100u + 20 + 320);
  // The estimate from bytes alone: the rest plus f x the split bytes.
  EXPECT_EQ(split_device_bytes_estimate(1000, 880, 0.5), 120u + 440);
}

}  // namespace
}  // namespace layerstream::sched

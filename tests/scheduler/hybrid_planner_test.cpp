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

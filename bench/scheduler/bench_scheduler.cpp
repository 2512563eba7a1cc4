// Streaming scheduler on the host backend with the sim-link throttle and
// synthetic layers whose compute is a busy arithmetic loop of controlled
// length on the compute stream's thread. Pass time is measured by the
// executor's device events (first compute start to last compute end), so the
// host's per-pass bookkeeping is not counted. Figures are counters:
//   *_ms      median pass time over the run, milliseconds
//   bound_ms  max(sum compute, streamed bytes / link bandwidth)
//   eff       bound / measured (1.0 = perfect overlap)
//   speedup   serial / overlapped
//   pred_err  |predicted - measured| / measured for the planner's plan
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "runtime/scheduler/executor.h"

namespace ls = layerstream;
namespace sc = layerstream::sched;

namespace {

constexpr uint64_t MiB = 1 << 20;

void spin_us(double us) {
  auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(us * 1e3));
  volatile double x = 1.0;
  while (std::chrono::steady_clock::now() < end)
    for (int i = 0; i < 64; ++i) x = x * 1.0000001 + 1e-9;
}

struct Model {
  std::vector<std::vector<uint8_t>> data;
  std::vector<sc::LayerSpec> layers;
  Model(const std::vector<uint64_t>& bytes, const std::vector<double>& compute_us) {
    data.resize(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) {
      data[i].resize(bytes[i]);
      for (size_t j = 0; j < bytes[i]; j += 4096) data[i][j] = static_cast<uint8_t>(i * 31 + j);
      sc::LayerSpec l;
      l.bytes = bytes[i];
      l.host_data = data[i].data();
      double us = compute_us[i];
      l.compute = [us](const sc::LayerRun&, ls::Stream& s) {
        return s.host_func([us] {
          spin_us(us);
          return ls::Status::OK();
        });
      };
      layers.push_back(std::move(l));
    }
  }
};

std::unique_ptr<ls::Device> device(double gbps) {
  ls::DeviceOptions o;
  o.backend = ls::BackendKind::kHost;
  o.sim_link_gbps = gbps;
  o.host_threads = 1;
  return std::move(ls::open_device(o)).value();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::unique_ptr<sc::Executor> make(ls::Device& dev, const Model& m, sc::ExecutorOptions o) {
  auto r = sc::Executor::create(dev, m.layers, o);
  if (!r.ok()) {
    fprintf(stderr, "executor: %s\n", r.status().ToString().c_str());
    std::abort();
  }
  return std::move(r).value();
}

void pass(benchmark::State& st, sc::Executor& ex, std::vector<double>& times) {
  ls::Status s = ex.run_pass();
  if (!s.ok()) st.SkipWithError(s.ToString().c_str());
  times.push_back(ex.last_pass().summary.measured_s);
}

// Uniform layers, everything streamed from pinned RAM through 2 slots.
// (1) balanced: overlapped vs serial side by side; (2) transfer- and compute-bound.
void BM_Uniform(benchmark::State& st) {
  const int n = 16;
  const double gbps = 1.0;
  const double link_us = MiB / (gbps * 1e3);  // 1 MiB at 1 GB/s: 1048.6 us
  const double compute_us = link_us * st.range(0) / 100.0;
  Model m(std::vector<uint64_t>(n, MiB), std::vector<double>(n, compute_us));
  auto dev = device(gbps);
  sc::ExecutorOptions o;
  o.vram_budget = 2 * MiB + MiB / 2;  // two slots, no room for a resident
  o.ram_budget = 64 * MiB;
  o.link_gbps = gbps;
  o.auto_replan = false;
  auto ex = make(*dev, m, o);
  const bool with_serial = st.range(1) != 0;
  std::unique_ptr<sc::Executor> serial;
  if (with_serial) {
    o.serial = true;
    serial = make(*dev, m, o);
  }
  std::vector<double> t_ov, t_se;
  for (int w = 0; w < 2; ++w) {
    (void)ex->run_pass();
    if (serial) (void)serial->run_pass();
  }
  for (auto _ : st) {
    pass(st, *ex, t_ov);
    if (serial) pass(st, *serial, t_se);
    st.SetIterationTime(t_ov.back());
  }
  const double bound = std::max(n * compute_us, n * link_us) * 1e-3;
  const double ov = median(t_ov) * 1e3;
  st.counters["overlapped_ms"] = ov;
  st.counters["bound_ms"] = bound;
  st.counters["eff"] = bound / ov;
  // The simulator's prediction for this plan under the measured cost model
  // (the plan itself was made before any compute was measured).
  sc::Plan measured_plan = ex->plan();
  (void)sc::evaluate_plan(ex->planner_input(measured_plan.batch_class), measured_plan);
  st.counters["pred_ms"] = measured_plan.predicted_pass_s * 1e3;
  st.counters["pred_err"] = std::abs(measured_plan.predicted_pass_s * 1e3 - ov) / ov;
  st.counters["last_compute_ms"] = ex->last_pass().summary.sum_compute_s * 1e3;
  st.counters["last_stall_ms"] = ex->last_pass().summary.total_stall_s() * 1e3;
  st.counters["min_ms"] = *std::min_element(t_ov.begin(), t_ov.end()) * 1e3;
  st.counters["max_ms"] = *std::max_element(t_ov.begin(), t_ov.end()) * 1e3;
  if (serial) {
    st.counters["serial_ms"] = median(t_se) * 1e3;
    st.counters["speedup"] = median(t_se) * 1e3 / ov;
  }
}
// Args: compute as % of transfer time, run serial side by side.
BENCHMARK(BM_Uniform)->Name("BM_Balanced")->Args({100, 1})->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Uniform)->Name("BM_TransferBound")->Args({40, 0})->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Uniform)->Name("BM_ComputeBound")->Args({200, 0})->UseManualTime()->Unit(benchmark::kMillisecond);

// (3) Non-uniform layers with room for some residency: the planner's plan vs
// "keep the first layers that fit" vs LRU, all measured side by side with the
// cost model the planner measured during warm-up.
void BM_Planner(benchmark::State& st) {
  std::vector<uint64_t> bytes;
  std::vector<double> us;
  for (int i = 0; i < 4; ++i) bytes.push_back(MiB), us.push_back(1500);      // small, heavy compute
  for (int i = 0; i < 4; ++i) bytes.push_back(4 * MiB), us.push_back(200);   // big, light compute
  for (int i = 0; i < 4; ++i) bytes.push_back(MiB), us.push_back(500);
  Model m(bytes, us);
  const double gbps = 1.0;
  auto dev = device(gbps);
  sc::ExecutorOptions o;
  o.vram_budget = 20 * MiB;
  o.ram_budget = 64 * MiB;
  o.link_gbps = gbps;
  auto planned = make(*dev, m, o);
  for (int w = 0; w < 3; ++w) (void)planned->run_pass();  // warm-up + re-plan from measured times
  sc::PlannerInput in = planned->planner_input(0);
  sc::Plan ff = sc::plan_first_fit(in, 2).value();
  sc::Plan lru = sc::plan_lru(in).value();
  o.auto_replan = false;
  o.plan = ff;
  auto first_fit = make(*dev, m, o);
  o.plan = lru;
  auto lru_ex = make(*dev, m, o);
  (void)first_fit->run_pass();
  (void)lru_ex->run_pass();
  std::vector<double> t_pl, t_ff, t_lru;
  for (auto _ : st) {
    pass(st, *planned, t_pl);
    pass(st, *first_fit, t_ff);
    pass(st, *lru_ex, t_lru);
    st.SetIterationTime(t_pl.back());
  }
  const double pl = median(t_pl) * 1e3;
  st.counters["planner_ms"] = pl;
  st.counters["first_fit_ms"] = median(t_ff) * 1e3;
  st.counters["lru_ms"] = median(t_lru) * 1e3;
  st.counters["ff_over_planner"] = median(t_ff) * 1e3 / pl;
  st.counters["lru_over_planner"] = median(t_lru) * 1e3 / pl;
  st.counters["pred_ms"] = planned->plan().predicted_pass_s * 1e3;
  st.counters["pred_err"] = std::abs(planned->plan().predicted_pass_s * 1e3 - pl) / pl;
  st.counters["bound_ms"] = planned->plan().lower_bound_s * 1e3;
  st.counters["ff_pred_ms"] = first_fit->plan().predicted_pass_s * 1e3;
  st.counters["lru_pred_ms"] = lru_ex->plan().predicted_pass_s * 1e3;
  st.counters["residents"] = planned->plan().count(sc::Tier::kResident);
  st.counters["slots"] = planned->plan().slots;
}
BENCHMARK(BM_Planner)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

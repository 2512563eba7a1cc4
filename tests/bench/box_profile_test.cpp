// Box profiles without a model file: reading hand-written and probed
// profiles (box_profile.h), model shapes seen as files (model_shape.h), and
// the per-strategy prediction (box_predict.h) checked against what the
// figures imply: the bound of streaming is streamed bytes / link, a host
// that reads RAM faster than the link takes the streamed layers in decode,
// one slower than it never gets any, and prefill streams.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "runtime/bench/box_predict.h"
#include "runtime/planning/box_profile.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/model_shape.h"
#include "tests/common/box_json.h"
#include "tests/common/testing.h"

namespace ls = layerstream;
namespace lb = layerstream::bench;
namespace lp = layerstream::planning;

namespace {

using nlohmann::json;

// A GPU box written by hand: device points give only GB/s (decode) or only
// GFLOP/s (prefill), host points GB/s and GMAC/s, types in lower case.
json gpu_box(double link_gbps, double ram_gbps, double host_decode_gbps) {
  return ls::testing::box_json({.device = "Test GPU",
                                .type = "q8_0",
                                .notes = "test box",
                                .link_gbps = link_gbps,
                                .disk_gbps = 5.0,
                                .decode_gbps = 2000.0,
                                .prefill_gflops = 300000.0,
                                .host_threads = 16,
                                .ram_read_gbps = ram_gbps,
                                .host_decode_gbps = host_decode_gbps,
                                .host_prefill_gmacs = 200.0});
}

TEST(BoxFigures, ReadsHandWrittenPointsAndRejectsJunk) {
  LS_ASSERT_OK_AND_ASSIGN(lp::BoxFigures b, lp::box_figures_from_json(gpu_box(50, 150, 120), "box file t"));
  EXPECT_EQ(b.backend, "cuda");
  EXPECT_EQ(b.device_name, "Test GPU");
  EXPECT_EQ(b.notes, "test box");
  EXPECT_DOUBLE_EQ(b.link_gbps, 50);
  EXPECT_DOUBLE_EQ(b.ram_read_gbps, 150);
  EXPECT_EQ(b.host_threads, 16);
  ASSERT_NE(b.device.find("Q8_0", "decode"), nullptr);  // canonical type names
  EXPECT_DOUBLE_EQ(b.device.find("Q8_0", "decode")->weight_gbps, 2000);
  EXPECT_DOUBLE_EQ(b.host.find("Q8_0", "prefill")->gflops, 400);  // 2 x GMAC/s
  EXPECT_EQ(b.host.find("Q4_K", "decode"), b.host.find("Q8_0", "decode"));  // another type's point of the shape
  EXPECT_EQ(&b.device_rates(), &b.device);  // a GPU: its own rates

  for (auto [path, value] : std::vector<std::pair<json::json_pointer, json>>{
           {json::json_pointer("/compute/0/shape"), "sideways"},
           {json::json_pointer("/compute/0/type"), "q9_9"},
           {json::json_pointer("/compute/0/weight_gbps"), -1.0},
           {json::json_pointer("/host/ram_read_gbps"), "fast"},
           {json::json_pointer("/host"), 3},
           {json::json_pointer("/link_gbps"), 0.0},
           {json::json_pointer("/compute"), json::array()}}) {
    json doc = gpu_box(50, 150, 120);
    doc[path] = value;
    auto r = lp::box_figures_from_json(doc, "box file t");
    ASSERT_FALSE(r.ok()) << path.to_string();
    EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
    EXPECT_NE(r.status().message().find("box file t"), std::string::npos) << r.status().message();
  }
  json no_rates = gpu_box(50, 150, 120);
  no_rates["compute"][0].erase("weight_gbps");
  EXPECT_FALSE(lp::box_figures_from_json(no_rates, "b").ok());

  // A host backend's device rates are its host figures (the same CPU kernels).
  json host = gpu_box(10, 5, 4);
  host["box"]["backend"] = "host";
  LS_ASSERT_OK_AND_ASSIGN(lp::BoxFigures h, lp::box_figures_from_json(host, "h"));
  EXPECT_EQ(&h.device_rates(), &h.host);
}

TEST(BoxFigures, ThisMachineIsTheBackendAndTheCpu) {
  lp::BoxFigures b;
  b.backend = "host";
  b.device_name = "host (64 threads)";
  b.host_cpu = lp::host_cpu_name();
  if (b.host_cpu.empty()) GTEST_SKIP() << "no CPU model name in /proc/cpuinfo on this machine";
  EXPECT_TRUE(lp::box_is_this_machine(b, "host", "host (2 threads)"));  // other threads, same CPU
  EXPECT_FALSE(lp::box_is_this_machine(b, "cuda", "host (2 threads)"));
  b.host_cpu = "Some Other CPU " + b.host_cpu;
  EXPECT_FALSE(lp::box_is_this_machine(b, "host", "host (64 threads)"));
  b.host_cpu.clear();  // no CPU in the file: the device name decides
  EXPECT_TRUE(lp::box_is_this_machine(b, "host", "host (64 threads)"));
  EXPECT_FALSE(lp::box_is_this_machine(b, "host", "host (2 threads)"));
}

TEST(BoxFigures, ShippedH200ProfileLoads) {
  LS_ASSERT_OK_AND_ASSIGN(lp::BoxFigures b, lp::load_box_figures(LAYERSTREAM_SOURCE_DIR "/bench/boxes/h200-pcie5-ddr5.json"));
  EXPECT_EQ(b.backend, "cuda");
  EXPECT_TRUE(b.has_host());
  EXPECT_FALSE(b.notes.empty());  // where the figures come from
  for (const char* t : {"Q4_K", "Q6_K"})
    for (const char* shape : {"decode", "prefill"}) {
      EXPECT_NE(b.device.points.count({t, shape}), 0u) << t << " " << shape;
      EXPECT_NE(b.host.points.count({t, shape}), 0u) << t << " " << shape;
    }
}

TEST(BoxFigures, MatmulSecondsIsMemoryOrComputeBound) {
  lp::RateTable r;
  lp::ComputePoint d, p;
  d.weight_gbps = 100;
  p.gflops = 1000;
  r.points[{"Q8_0", "decode"}] = d;
  r.points[{"Q8_0", "prefill"}] = p;
  std::mt19937_64 rng(ls::testing::fresh_seed());
  const int64_t n_out = 256 + rng() % 4096, n_in = 32 * (8 + rng() % 128);
  const uint64_t bytes = n_out * n_in * 34 / 32;
  EXPECT_DOUBLE_EQ(lp::matmul_seconds(r, ls::GgmlType::Q8_0, n_out, n_in, bytes, 1), bytes / 100e9);
  const int tokens = 2 + rng() % 500;
  EXPECT_DOUBLE_EQ(lp::matmul_seconds(r, ls::GgmlType::Q8_0, n_out, n_in, bytes, tokens),
                   std::max(bytes / 100e9, 2.0 * n_out * n_in * tokens / 1000e9));
  lp::RateTable empty;
  EXPECT_DOUBLE_EQ(lp::matmul_seconds(empty, ls::GgmlType::Q8_0, n_out, n_in, bytes, 1, 50), bytes / 50e9);
  EXPECT_EQ(lp::matmul_seconds(empty, ls::GgmlType::Q8_0, n_out, n_in, bytes, 1), 0);
}

TEST(ModelShape, ParsesPresetsAndKeysAndRejectsJunk) {
  LS_ASSERT_OK_AND_ASSIGN(ls::ExampleModelSpec s, ls::parse_model_shape("llama-70b-q4_k_m"));
  EXPECT_EQ(s.n_layers, 80u);
  EXPECT_EQ(s.n_embd, 8192u);
  EXPECT_EQ(s.n_ff, 28672u);
  EXPECT_EQ(s.n_head, 64u);
  EXPECT_EQ(s.n_head_kv, 8u);
  EXPECT_EQ(s.n_vocab, 128256u);
  EXPECT_EQ(s.mix, ls::ExampleMix::kQ4_K_M);
  LS_ASSERT_OK_AND_ASSIGN(ls::ExampleModelSpec o, ls::parse_model_shape("llama-70b-q4_k_m,layers=4"));
  EXPECT_EQ(o.n_layers, 4u);
  EXPECT_EQ(o.n_embd, 8192u);
  LS_ASSERT_OK_AND_ASSIGN(ls::ExampleModelSpec k,
                          ls::parse_model_shape("layers=3,hidden=512,ffn=1024,heads=8,kv_heads=2,vocab=600,dtype=q8_0"));
  EXPECT_EQ(k.dtype, ls::GgmlType::Q8_0);
  EXPECT_EQ(k.mix, ls::ExampleMix::kUniform);
  for (const char* bad : {"llama-1t", "layers=x", "colour=3", "layers=3,hidden=500,heads=3", "dtype=q9",
                          "layers=2,llama-70b-q4_k_m"}) {
    auto r = ls::parse_model_shape(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << bad << ": " << r.status().ToString();
  }
}

// Qwen3-30B-A3B's preset: the GGUF keys llama.cpp reads for qwen3moe, the
// expert tensors' shapes, and 30.5 B parameters in all (Qwen's figure).
TEST(ModelShape, Qwen3MoePresetHasTheModelsSizes) {
  LS_ASSERT_OK_AND_ASSIGN(ls::ExampleModelSpec s, ls::parse_model_shape("qwen3-30b-a3b-q4_k_m"));
  LS_ASSERT_OK_AND_ASSIGN(ls::GgufFile f, ls::model_shape_file(s, "shape qwen3"));
  auto u32 = [&](const std::string& key) {
    auto v = f.get_u32_or(key, 0);
    return v.ok() ? *v : 0u;
  };
  EXPECT_EQ(u32("qwen3moe.block_count"), 48u);
  EXPECT_EQ(u32("qwen3moe.embedding_length"), 2048u);
  EXPECT_EQ(u32("qwen3moe.attention.head_count"), 32u);
  EXPECT_EQ(u32("qwen3moe.attention.head_count_kv"), 4u);
  EXPECT_EQ(u32("qwen3moe.attention.key_length"), 128u);
  EXPECT_EQ(u32("qwen3moe.expert_count"), 128u);
  EXPECT_EQ(u32("qwen3moe.expert_used_count"), 8u);
  EXPECT_EQ(u32("qwen3moe.expert_feed_forward_length"), 768u);
  uint64_t params = 0;
  bool saw_experts = false;
  for (const ls::GgufTensorInfo& t : f.tensors()) {
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    params += n;
    if (t.name == "blk.0.ffn_up_exps.weight") {
      saw_experts = true;
      EXPECT_EQ(t.dims, (std::vector<uint64_t>{2048, 768, 128}));
    }
  }
  EXPECT_TRUE(saw_experts);
  EXPECT_NEAR(static_cast<double>(params), 30.5e9, 0.05e9);
  auto bad = ls::parse_model_shape("qwen3-30b-a3b-q4_k_m,experts_used=200");
  EXPECT_TRUE(bad.status().IsInvalidArgument()) << bad.status().ToString();
  EXPECT_FALSE(ls::parse_model_shape("arch=qwen3moe,layers=2,hidden=256,ffn=256,heads=4,kv_heads=2,vocab=600").ok());
}

// The shape file has the layout of the file the generator writes.
TEST(ModelShape, FileMatchesTheGeneratedModel) {
  ls::testing::TempDir dir;
  const uint64_t seed = ls::testing::fresh_seed() % 1000;
  LS_ASSERT_OK_AND_ASSIGN(ls::ExampleModelSpec spec,
                          ls::parse_model_shape("layers=3,hidden=256,ffn=768,heads=4,kv_heads=2,vocab=600,dtype=q4_k_m"));
  spec.seed = seed;
  const std::string path = dir.file("m.gguf");
  ls::ExampleWriteOptions wo;
  wo.fsync = false;
  LS_ASSERT_OK(ls::write_example_model(path, spec, wo));
  LS_ASSERT_OK_AND_ASSIGN(ls::GgufFile real, ls::read_gguf_file(path));
  LS_ASSERT_OK_AND_ASSIGN(ls::GgufFile shape, ls::model_shape_file(spec, "shape test"));
  EXPECT_EQ(shape.path(), "shape test");
  EXPECT_EQ(shape.file_size(), real.file_size());
  EXPECT_EQ(shape.data_offset(), real.data_offset());
  EXPECT_EQ(shape.tensors(), real.tensors());
  EXPECT_EQ(shape.metadata().size(), real.metadata().size());
}

lb::PredictOptions predict_options(lb::BenchMode mode, int tokens, uint64_t vram) {
  lb::PredictOptions o;
  o.runner.vram_budget = vram;
  o.runner.ram_budget = 64ull << 30;
  o.runner.n_ctx = 256;
  o.work.mode = mode;
  o.work.tokens = tokens;
  o.strategies = {"overlap", "host", "serial", "planned"};
  return o;
}

TEST(BoxPredict, SitesFollowTheFigures) {
  // 12 blocks of ~64 MiB (Q8_0) and a head; a budget holding about half.
  LS_ASSERT_OK_AND_ASSIGN(ls::ExampleModelSpec spec,
                          ls::parse_model_shape("layers=12,hidden=4096,ffn=6144,heads=32,kv_heads=8,vocab=32000,dtype=q8_0"));
  LS_ASSERT_OK_AND_ASSIGN(ls::GgufFile file, ls::model_shape_file(spec, "shape t"));
  const uint64_t vram = 512ull << 20;

  // Host RAM (150 GB/s) much faster than the link (20 GB/s): decode computes
  // the non-resident blocks on the host.
  LS_ASSERT_OK_AND_ASSIGN(lp::BoxFigures fast, lp::box_figures_from_json(gpu_box(20, 150, 120), "fast"));
  LS_ASSERT_OK_AND_ASSIGN(lb::BoxPrediction d,
                          lb::predict_with_box(fast, file, predict_options(lb::BenchMode::kDecode, 1, vram)));
  ASSERT_EQ(d.strategies.size(), 4u);
  EXPECT_EQ(d.layers, 13);
  std::map<std::string, const lb::StrategyPrediction*> by;
  for (const auto& s : d.strategies) {
    SCOPED_TRACE(s.name);
    ASSERT_TRUE(s.error.empty()) << s.error;
    EXPECT_EQ(s.sites.size(), 13u);
    EXPECT_EQ(s.resident + s.streamed + s.host + s.split, 13);
    EXPECT_NEAR(s.tokens_per_s, 1 / s.pass_s, 1e-9 / s.pass_s);
    by[s.name] = &s;
  }
  // Streaming strategies: at least the streamed layers' bytes over the link.
  for (const char* n : {"overlap", "serial"}) {
    const auto& s = *by[n];
    double streamed = 0;
    for (int i = 0; i < 13; ++i)
      if (s.sites[i] == 'S') streamed += static_cast<double>(d.layer_bytes[i]);
    EXPECT_GT(s.streamed, 0) << n;
    EXPECT_GE(s.pass_s, streamed / 20e9 * (1 - 1e-9)) << n;
    EXPECT_EQ(s.host, 0) << n;
    EXPECT_GE(s.pass_s, s.lower_bound_s * (1 - 1e-9)) << n;
  }
  EXPECT_GT(by["host"]->host, 0);
  EXPECT_EQ(by["host"]->streamed, 0);
  EXPECT_GT(by["planned"]->host, 0);
  EXPECT_LT(by["host"]->pass_s, by["overlap"]->pass_s);
  EXPECT_LE(by["planned"]->pass_s, std::min(by["host"]->pass_s, by["overlap"]->pass_s) * 1.001);

  // A host slower than the link (2 GB/s of matvec): planned keeps every block on the device.
  LS_ASSERT_OK_AND_ASSIGN(lp::BoxFigures slow, lp::box_figures_from_json(gpu_box(20, 3, 2), "slow"));
  LS_ASSERT_OK_AND_ASSIGN(lb::BoxPrediction ds,
                          lb::predict_with_box(slow, file, predict_options(lb::BenchMode::kDecode, 1, vram)));
  EXPECT_EQ(ds.strategies[3].name, "planned");
  EXPECT_EQ(ds.strategies[3].host, 0) << ds.strategies[3].sites;
  EXPECT_GT(ds.strategies[1].pass_s, ds.strategies[0].pass_s);  // host loses to overlap

  // Prefill of 256 tokens: the GPU's compute wins, planned streams.
  LS_ASSERT_OK_AND_ASSIGN(lb::BoxPrediction p,
                          lb::predict_with_box(fast, file, predict_options(lb::BenchMode::kPrefill, 256, vram)));
  EXPECT_EQ(p.mode, "prefill");
  EXPECT_EQ(p.strategies[3].host, 0) << p.strategies[3].sites;
  EXPECT_GT(p.strategies[1].pass_s, p.strategies[3].pass_s);
  const json j = lb::to_json(p, {{"planned", 0.5}});
  EXPECT_EQ(j["strategies"].size(), 4u);
  EXPECT_DOUBLE_EQ(j["strategies"][3]["measured_median_s"].get<double>(), 0.5);
  EXPECT_NE(lb::format_prediction(p).find("sites per layer"), std::string::npos);
}

TEST(BoxPredict, ResidentThatDoesNotFitSaysWhy) {
  LS_ASSERT_OK_AND_ASSIGN(ls::ExampleModelSpec spec,
                          ls::parse_model_shape("layers=4,hidden=2048,ffn=4096,heads=16,kv_heads=4,vocab=32000,dtype=q8_0"));
  LS_ASSERT_OK_AND_ASSIGN(ls::GgufFile file, ls::model_shape_file(spec, "shape r"));
  LS_ASSERT_OK_AND_ASSIGN(lp::BoxFigures box, lp::box_figures_from_json(gpu_box(20, 150, 120), "b"));
  auto o = predict_options(lb::BenchMode::kDecode, 1, 128ull << 20);
  o.strategies = {"resident", "planned"};
  LS_ASSERT_OK_AND_ASSIGN(lb::BoxPrediction p, lb::predict_with_box(box, file, o));
  EXPECT_FALSE(p.strategies[0].error.empty());
  EXPECT_TRUE(p.strategies[1].error.empty()) << p.strategies[1].error;
  // A GPU profile without host figures cannot predict the host site.
  json nohost = gpu_box(20, 150, 120);
  nohost.erase("host");
  LS_ASSERT_OK_AND_ASSIGN(lp::BoxFigures nh, lp::box_figures_from_json(nohost, "b"));
  o.strategies = {"host", "planned"};
  LS_ASSERT_OK_AND_ASSIGN(lb::BoxPrediction q, lb::predict_with_box(nh, file, o));
  EXPECT_NE(q.strategies[0].error.find("no host figures"), std::string::npos) << q.strategies[0].error;
  EXPECT_EQ(q.strategies[1].host, 0);
  o.strategies = {"sideways"};
  EXPECT_FALSE(lb::predict_with_box(box, file, o).ok());
}

}  // namespace

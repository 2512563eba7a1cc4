// llama.cpp's per-tensor choices (quantize_plan.h) on example-model files:
// which tensors are quantised, which keep more bits in each mix, the output
// and tied-embedding rules, and the fallback for rows not a multiple of 256.
#include <algorithm>
#include <map>
#include <string>

#include "runtime/model/example_model.h"
#include "runtime/model/gguf_writer.h"
#include "runtime/model/quantize_plan.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

class Plan : public ::testing::Test {
 protected:
  // A model file with `spec`, and its plan for `type` as name -> output type.
  std::map<std::string, GgmlType> plan(const ExampleModelSpec& spec, const std::string& type, bool pure = false,
                                      bool imatrix = false) {
    const std::string path = dir_.file("m.gguf");
    EXPECT_TRUE(write_example_model(path, spec).ok());
    auto f = read_gguf_file(path);
    EXPECT_TRUE(f.ok());
    auto target = parse_quant_target(type);
    EXPECT_TRUE(target.has_value()) << type;
    auto p = plan_quantization(*f, *target, PlanOptions{pure, imatrix});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    std::map<std::string, GgmlType> out;
    for (size_t i = 0; i < f->tensors().size(); ++i) out[f->tensors()[i].name] = (*p)[i].type;
    return out;
  }
  static ExampleModelSpec spec(uint32_t layers, uint32_t ff, uint32_t kv_heads = 2) {
    ExampleModelSpec s;
    s.n_layers = layers;
    s.n_embd = 256;
    s.n_ff = ff;
    s.n_head = 4;
    s.n_head_kv = kv_heads;
    s.alignment = 32;
    return s;
  }
  static std::string blk(int i, const char* t) { return "blk." + std::to_string(i) + "." + t + ".weight"; }
  testing::TempDir dir_;
};

TEST_F(Plan, ParsesTargetsByName) {
  EXPECT_EQ(parse_quant_target("q4_k_m")->base, GgmlType::Q4_K);
  EXPECT_EQ(parse_quant_target("Q4_K_M")->file_type, 15u);
  EXPECT_EQ(parse_quant_target("iq4_xs")->base, GgmlType::IQ4_XS);
  EXPECT_TRUE(parse_quant_target("q6_k")->mix);
  EXPECT_FALSE(parse_quant_target("q4_k")->mix);
  EXPECT_FALSE(parse_quant_target("q4_k_x").has_value());
  EXPECT_FALSE(parse_quant_target("").has_value());
  EXPECT_NE(quant_target_names().find("Q3_K_M"), std::string::npos);
}

TEST_F(Plan, Q4KMKeepsSixBitsWhereLlamaCppDoes) {
  const auto p = plan(spec(8, 768), "q4_k_m");
  // use_more_bits(i, 8): layers 0, 7 and every third from 1 (i - 1) % 3 == 2: 3, 6
  for (int i = 0; i < 8; ++i) {
    const bool more = i == 0 || i == 7 || i == 3 || i == 6;
    EXPECT_EQ(p.at(blk(i, "attn_v")), more ? GgmlType::Q6_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(p.at(blk(i, "ffn_down")), more ? GgmlType::Q6_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(p.at(blk(i, "attn_q")), GgmlType::Q4_K);
    EXPECT_EQ(p.at(blk(i, "ffn_up")), GgmlType::Q4_K);
    EXPECT_EQ(p.at("blk." + std::to_string(i) + ".attn_norm.weight"), GgmlType::F32);  // norms stay
  }
  EXPECT_EQ(p.at("output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(p.at("token_embd.weight"), GgmlType::Q4_K);
  EXPECT_EQ(p.at("output_norm.weight"), GgmlType::F32);
}

TEST_F(Plan, Q3KMAndQ2KRules) {
  const auto q3 = plan(spec(16, 768), "q3_k_m");
  EXPECT_EQ(q3.at(blk(0, "attn_v")), GgmlType::Q5_K);
  EXPECT_EQ(q3.at(blk(1, "attn_v")), GgmlType::Q5_K);
  EXPECT_EQ(q3.at(blk(2, "attn_v")), GgmlType::Q4_K);
  EXPECT_EQ(q3.at(blk(0, "ffn_down")), GgmlType::Q5_K);  // i < 16 / 16
  EXPECT_EQ(q3.at(blk(5, "ffn_down")), GgmlType::Q4_K);
  EXPECT_EQ(q3.at(blk(5, "attn_output")), GgmlType::Q4_K);
  EXPECT_EQ(q3.at(blk(5, "attn_q")), GgmlType::Q3_K);
  const auto q2 = plan(spec(4, 768, 2), "q2_k");  // n_gqa 2: attn_v Q3_K
  EXPECT_EQ(q2.at(blk(0, "attn_v")), GgmlType::Q3_K);
  EXPECT_EQ(q2.at(blk(0, "ffn_down")), GgmlType::Q3_K);
  EXPECT_EQ(q2.at(blk(0, "attn_output")), GgmlType::Q3_K);
  EXPECT_EQ(q2.at(blk(0, "ffn_gate")), GgmlType::Q2_K);
  const auto q2g = plan(spec(4, 768, 1), "q2_k");  // n_gqa 4: attn_v Q4_K
  EXPECT_EQ(q2g.at(blk(0, "attn_v")), GgmlType::Q4_K);
}

TEST_F(Plan, RowsNotAMultipleOf256FallBack) {
  // ffn_down rows are n_ff = 704 = 22 * 32 elements.
  const auto p = plan(spec(8, 704), "q4_k_m");
  EXPECT_EQ(p.at(blk(0, "ffn_down")), GgmlType::Q8_0);  // Q6_K -> Q8_0
  EXPECT_EQ(p.at(blk(1, "ffn_down")), GgmlType::Q5_0);  // Q4_K -> Q5_0
  EXPECT_EQ(plan(spec(4, 704), "q5_k_m").at(blk(1, "ffn_down")), GgmlType::Q5_1);
  EXPECT_EQ(plan(spec(4, 704), "q3_k_m").at(blk(3, "ffn_gate")), GgmlType::Q3_K);  // rows of 256: no fallback
  EXPECT_EQ(plan(spec(4, 704), "iq4_xs").at(blk(1, "ffn_down")), GgmlType::IQ4_NL);
  EXPECT_EQ(plan(spec(4, 704), "q2_k").at(blk(1, "ffn_down")), GgmlType::Q4_0);  // Q3_K -> Q4_0
}

TEST_F(Plan, TiedEmbeddingsTakeTheOutputRule) {
  ExampleModelSpec s = spec(4, 768);
  s.tied_output = true;
  EXPECT_EQ(plan(s, "q4_k_m").at("token_embd.weight"), GgmlType::Q6_K);
  EXPECT_EQ(plan(s, "q8_0").at("token_embd.weight"), GgmlType::Q8_0);
  s.n_embd = 288;  // rows of 288: Q8_0 (llama.cpp's rule for an output whose rows do not fit 256)
  s.n_head = 4;
  EXPECT_EQ(plan(s, "q4_k_m").at("token_embd.weight"), GgmlType::Q8_0);
}

TEST_F(Plan, PlainTypesAndPureRefuseRowsTheyCannotHold) {
  const auto p = plan(spec(4, 768), "q4_k_m", /*pure=*/true);
  EXPECT_EQ(p.at("output.weight"), GgmlType::Q4_K);
  EXPECT_EQ(p.at(blk(0, "attn_v")), GgmlType::Q4_K);
  const std::string path = dir_.file("odd.gguf");
  ASSERT_TRUE(write_example_model(path, spec(2, 704)).ok());
  auto f = read_gguf_file(path);
  ASSERT_TRUE(f.ok());
  auto r = plan_quantization(*f, *parse_quant_target("q4_k"), PlanOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("ffn_down"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("cannot hold rows of 704"), std::string::npos) << r.status().message();
}

TEST_F(Plan, FloatTargetsConvertOnlyMatrices) {
  const auto p = plan(spec(2, 768), "f32");
  EXPECT_EQ(p.at(blk(0, "attn_q")), GgmlType::F32);
  EXPECT_EQ(p.at("output.weight"), GgmlType::F32);
  EXPECT_EQ(plan(spec(2, 768), "q8_0").at("output.weight"), GgmlType::Q8_0);
}

TEST_F(Plan, ImatrixChangesIq4FfnDown) {
  EXPECT_EQ(plan(spec(8, 768), "iq4_xs").at(blk(0, "ffn_down")), GgmlType::Q5_K);
  EXPECT_EQ(plan(spec(8, 768), "iq4_xs", false, true).at(blk(0, "ffn_down")), GgmlType::IQ4_XS);
}

// Files that list blk.10 before blk.2 (as SmolLM2's does): the layers that get
// more bits are chosen by layer number, as llama.cpp counts them.
TEST_F(Plan, LayerRulesFollowLayerNumbersNotFileOrder) {
  GgufWriter w(32);
  ASSERT_TRUE(w.add("general.architecture", GgufValue::string("llama")).ok());
  ASSERT_TRUE(w.add("llama.block_count", GgufValue::u32(12)).ok());
  ASSERT_TRUE(w.add("llama.attention.head_count", GgufValue::u32(4)).ok());
  ASSERT_TRUE(w.add("llama.attention.head_count_kv", GgufValue::u32(2)).ok());
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) names.push_back(blk(i, "attn_v")), names.push_back(blk(i, "ffn_down"));
  std::sort(names.begin(), names.end());  // blk.0, blk.1, blk.10, blk.11, blk.2, ...
  for (const auto& n : names) ASSERT_TRUE(w.add_tensor(n, {256, 64}, GgmlType::F16).ok());
  const std::string path = dir_.file("sorted.gguf");
  ASSERT_TRUE(w.write(path, [](size_t, const GgufTensorInfo& t, TensorSink& sink) {
                 std::vector<uint8_t> zeros(t.n_bytes);
                 return sink.write(zeros.data(), zeros.size());
               }).ok());
  auto f = read_gguf_file(path);
  ASSERT_TRUE(f.ok());
  auto p = plan_quantization(*f, *parse_quant_target("q4_k_m"), PlanOptions{});
  ASSERT_TRUE(p.ok());
  for (size_t k = 0; k < names.size(); ++k) {
    const int layer = std::stoi(names[k].substr(4));
    // use_more_bits(i, 12): i < 1, i >= 10, (i - 1) % 3 == 2
    const bool more = layer < 1 || layer >= 10 || (layer - 1) % 3 == 2;
    EXPECT_EQ((*p)[k].type, more ? GgmlType::Q6_K : GgmlType::Q4_K) << names[k];
  }
}

// The example model's mixes are what quantize makes of the F16 model of the
// same shape: one rule for both (the fallback for rows of 704 and the tied
// output included).
TEST_F(Plan, ExampleMixesAreTheQuantizedF16Model) {
  for (ExampleMix mix : {ExampleMix::kQ4_K_M, ExampleMix::kQ5_K_M, ExampleMix::kQ3_K_M}) {
    for (bool tied : {false, true}) {
      ExampleModelSpec f16 = spec(16, 704);
      f16.tied_output = tied;
      ExampleModelSpec mixed = f16;
      mixed.mix = mix;
      mixed.dtype = example_mix_base(mix);
      const std::string path = dir_.file("mixed.gguf");
      ASSERT_TRUE(write_example_model(path, mixed).ok());
      auto f = read_gguf_file(path);
      ASSERT_TRUE(f.ok());
      const auto want = plan(f16, example_mix_name(mix));
      ASSERT_EQ(want.size(), f->tensors().size());
      for (const GgufTensorInfo& t : f->tensors())
        EXPECT_EQ(t.type, want.at(t.name)) << example_mix_name(mix) << (tied ? " tied " : " ") << t.name;
    }
  }
}

}  // namespace
}  // namespace layerstream

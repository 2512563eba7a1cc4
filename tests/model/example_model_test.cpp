// The example-model generator: a valid Llama file with the example tokenizer,
// deterministic bytes, sensible weight scales, and --size landing within 5%.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "kernels/math/convert_row.h"
#include "runtime/model/example_model.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/tokenizer/example_vocab.h"
#include "tests/common/gguf_layout_eq.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

ExampleModelSpec small_spec(GgmlType dtype, uint64_t seed) {
  return {.n_layers = 3, .n_embd = 128, .n_ff = 320, .n_head = 4, .n_head_kv = 2, .n_vocab = 600, .n_ctx = 512,
          .dtype = dtype, .seed = seed};
}

std::vector<float> decode_tensor(const std::string& path, const GgufTensorInfo& t) {
  auto src = FileByteSource::open(path);
  std::vector<uint8_t> raw(t.n_bytes);
  EXPECT_TRUE((*src)->read_at(t.offset, raw.data(), raw.size()).ok());
  std::vector<float> out(t.n_elements());
  EXPECT_TRUE(math::decode_row(t.type, raw.data(), out.size(), out.data()).ok());
  return out;
}

class ExampleModelTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(ExampleModelTest, WritesAValidLlamaModelThatReadsBackIdentically) {
  const uint64_t seed = testing::fresh_seed();
  const ExampleModelSpec spec = small_spec(GetParam(), seed);
  testing::TempDir dir;
  const std::string path = dir.file("m.gguf");
  LS_ASSERT_OK(write_example_model(path, spec));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  LS_ASSERT_OK_AND_ASSIGN(GgufWriter layout, example_model_layout(spec));
  EXPECT_EQ(std::filesystem::file_size(path), layout.file_size());

  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
  testing::expect_file_matches_layout(f, layout, 4096);
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
  EXPECT_EQ(m.hparams.n_layers, spec.n_layers);
  EXPECT_EQ(m.hparams.n_embd, spec.n_embd);
  EXPECT_EQ(m.hparams.n_ff, spec.n_ff);
  EXPECT_EQ(m.hparams.n_head_kv, spec.n_head_kv);
  EXPECT_EQ(m.hparams.n_vocab, spec.n_vocab);
  EXPECT_EQ(m.hparams.n_ctx_train, spec.n_ctx);
  for (const auto& l : m.layers) EXPECT_EQ(l.span_begin % 4096, 0u) << l.name;
  EXPECT_EQ(f.get_u32("general.file_type").value(), llama_file_type(spec.dtype));

  LS_ASSERT_OK_AND_ASSIGN(TokenizerVocab v, read_tokenizer_vocab(f));
  const TokenizerVocab want = make_example_vocab(spec.n_vocab);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.tokens, want.tokens);
  EXPECT_EQ(v.scores, want.scores);
  EXPECT_EQ(v.token_types, want.token_types);
  EXPECT_EQ(v.bos_id, want.bos_id);
  EXPECT_EQ(v.eos_id, want.eos_id);
  EXPECT_EQ(v.unk_id, want.unk_id);
  EXPECT_EQ(v.add_bos, want.add_bos);

  // Weight scales: norms near 1; matrices zero-mean with the intended spread;
  // residual-branch outputs scaled down by 1/sqrt(2 * n_layers).
  for (const auto& t : f.tensors()) {
    const auto x = decode_tensor(path, t);
    double sum = 0, sq = 0;
    for (float v : x) {
      ASSERT_TRUE(std::isfinite(v)) << t.name;
      sum += v;
      sq += double(v) * v;
    }
    const double mean = sum / x.size(), std = std::sqrt(sq / x.size() - mean * mean);
    if (t.name.find("norm") != std::string::npos) {
      EXPECT_NEAR(mean, 1.0, 0.02) << t.name;
      continue;
    }
    double want_std = 1.0 / std::sqrt(double(spec.n_embd));
    if (t.name == "token_embd.weight") want_std = 1.0;
    if (t.name.find("attn_output") != std::string::npos) want_std /= std::sqrt(2.0 * spec.n_layers);
    if (t.name.find("ffn_down") != std::string::npos) want_std = 1.0 / std::sqrt(double(spec.n_ff) * 2.0 * spec.n_layers);
    EXPECT_NEAR(std, want_std, 0.2 * want_std) << t.name;  // 4-bit rounding widens the spread a little
    EXPECT_NEAR(mean, 0.0, 0.1 * want_std) << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, ExampleModelTest,
                         ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                                           GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                           GgmlType::IQ4_NL),
                         [](const auto& info) { return std::string(ggml_type_traits(info.param).name); });

TEST(ExampleModel, BytesDependOnTheSeedOnlyNotOnThreads) {
  const uint64_t seed = testing::fresh_seed();
  testing::TempDir dir;
  ExampleModelSpec spec = small_spec(GgmlType::Q8_0, seed);
  spec.n_embd = 512;  // tensors of several chunks
  spec.n_ff = 1408;
  spec.n_head = 8;
  ExampleWriteOptions one, three;
  one.threads = 1;
  three.threads = 3;
  one.fsync = three.fsync = false;
  LS_ASSERT_OK(write_example_model(dir.file("a.gguf"), spec, one));
  LS_ASSERT_OK(write_example_model(dir.file("b.gguf"), spec, three));
  EXPECT_EQ(testing::read_file(dir.file("a.gguf")), testing::read_file(dir.file("b.gguf")));
  spec.seed = seed + 1;
  LS_ASSERT_OK(write_example_model(dir.file("c.gguf"), spec, one));
  EXPECT_NE(testing::read_file(dir.file("a.gguf")), testing::read_file(dir.file("c.gguf")));
}

TEST(ExampleModel, SizeTargetsLandWithinFivePercent) {
  for (GgmlType t : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F32}) {
    for (uint64_t target : {uint64_t{4} << 20, uint64_t{100} << 20, uint64_t{1} << 30, uint64_t{6} << 30,
                            uint64_t{70} << 30}) {
      LS_ASSERT_OK_AND_ASSIGN(ExampleModelSpec s, example_spec_for_size(target, t));
      LS_ASSERT_OK(validate_example_spec(s));
      LS_ASSERT_OK_AND_ASSIGN(GgufWriter w, example_model_layout(s));
      const double err = std::fabs(double(w.file_size()) - double(target)) / double(target);
      EXPECT_LE(err, 0.05) << ggml_type_name(uint32_t(t)) << " target " << target << " got " << w.file_size()
                           << " (" << s.n_layers << " layers, hidden " << s.n_embd << ")";
    }
  }
  // The new types and the mixes (layers of different sizes).
  for (auto [t, mix] : {std::pair{GgmlType::Q6_K, ExampleMix::kUniform}, std::pair{GgmlType::Q5_0, ExampleMix::kUniform},
                        std::pair{GgmlType::Q4_K, ExampleMix::kQ4_K_M}, std::pair{GgmlType::Q5_K, ExampleMix::kQ5_K_M},
                        std::pair{GgmlType::Q3_K, ExampleMix::kQ3_K_M}}) {
    for (uint64_t target : {uint64_t{20} << 20, uint64_t{100} << 20, uint64_t{1} << 30, uint64_t{6} << 30}) {
      LS_ASSERT_OK_AND_ASSIGN(ExampleModelSpec s, example_spec_for_size(target, t, 1, mix));
      LS_ASSERT_OK(validate_example_spec(s));
      LS_ASSERT_OK_AND_ASSIGN(GgufWriter w, example_model_layout(s));
      const double err = std::fabs(double(w.file_size()) - double(target)) / double(target);
      EXPECT_LE(err, 0.05) << ggml_type_name(uint32_t(t)) << " " << example_mix_name(mix) << " target " << target
                           << " got " << w.file_size() << " (" << s.n_layers << " layers, hidden " << s.n_embd << ")";
    }
  }
  EXPECT_TRUE(example_spec_for_size(1000, GgmlType::F16).status().IsInvalidArgument());
}

TEST(ExampleModel, InvalidSpecsAreRejectedWithTheField) {
  ExampleModelSpec s = small_spec(GgmlType::Q4_0, 1);
  s.n_head = 3;
  Status st = validate_example_spec(s);
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_NE(st.message().find("heads = 3"), std::string::npos) << st.message();
  s = small_spec(GgmlType::Q4_0, 1);
  s.n_ff = 100;
  EXPECT_NE(validate_example_spec(s).message().find("ffn = 100"), std::string::npos);
  s = small_spec(GgmlType::IQ2_XXS, 1);
  EXPECT_NE(validate_example_spec(s).message().find("unsupported tensor type IQ2_XXS (id 16)"), std::string::npos);
  s = small_spec(GgmlType::F16, 1);
  s.n_vocab = 100;
  EXPECT_TRUE(validate_example_spec(s).IsInvalidArgument());
}

}  // namespace
}  // namespace layerstream

namespace layerstream {
namespace {

// The mixes put each tensor at the type llama.cpp's quantiser would, fall
// back from 256-element blocks for rows that are not a multiple of 256, and
// write llama.cpp's file type; --align 32 gives a 32-aligned file.
TEST(ExampleModel, MixesPickTypesPerTensorAndFallBackForShortRows) {
  testing::TempDir dir;
  ExampleModelSpec s = small_spec(GgmlType::Q4_K, testing::fresh_seed());
  s.n_layers = 8;
  s.n_embd = 256;  // rows of attn_*, ffn_gate/up, output: multiples of 256
  s.n_ff = 320;    // ffn_down rows: 320, not a multiple of 256
  s.mix = ExampleMix::kQ4_K_M;
  s.alignment = 32;
  const std::string path = dir.file("m.gguf");
  ASSERT_TRUE(write_example_model(path, s).ok());
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.get_u32("general.file_type").value(), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  auto type_of = [&](const std::string& n) { return f.find_tensor(n)->type; };
  EXPECT_EQ(type_of("output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of("token_embd.weight"), GgmlType::Q4_K);
  // use_more_bits(i, 8): layers 0 and 7, and (i - 1) % 3 == 2: layer 3, 6
  for (int i = 0; i < 8; ++i) {
    const bool more = i == 0 || i == 3 || i == 6 || i == 7;
    EXPECT_EQ(type_of(fmt::format("blk.{}.attn_v.weight", i)), more ? GgmlType::Q6_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(type_of(fmt::format("blk.{}.attn_q.weight", i)), GgmlType::Q4_K) << i;
    // ffn_down rows are 320 long: Q6_K falls back to Q8_0, Q4_K to Q5_0
    EXPECT_EQ(type_of(fmt::format("blk.{}.ffn_down.weight", i)), more ? GgmlType::Q8_0 : GgmlType::Q5_0) << i;
  }
  for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % 32, 0u) << t.name;
  LS_EXPECT_OK(load_llama_model(f).status());

  s.mix = ExampleMix::kQ3_K_M;  // needs dtype Q3_K
  EXPECT_NE(validate_example_spec(s).message().find("needs dtype Q3_K"), std::string::npos);
  s.dtype = GgmlType::Q3_K;
  s.alignment = 48;
  EXPECT_NE(validate_example_spec(s).message().find("alignment = 48"), std::string::npos);
}

}  // namespace
}  // namespace layerstream

namespace layerstream {
namespace {

// The mixtures of experts: llama.cpp's keys, tensor names and shapes
// (qwen3moe; Mixtral as a llama file with expert keys), and in a Q4_K_M mix
// the types llama.cpp's quantiser gives expert models.
TEST(ExampleMoeModel, WritesLlamaCppsExpertKeysTensorsAndMixTypes) {
  testing::TempDir dir;
  for (const std::string arch : {"qwen3moe", "mixtral"}) {
    SCOPED_TRACE(arch);
    ExampleModelSpec s{.n_layers = 4, .n_embd = 256, .n_ff = 256, .n_head = 4, .n_head_kv = 2, .n_vocab = 512,
                       .n_ctx = 256, .dtype = GgmlType::Q4_K, .mix = ExampleMix::kQ4_K_M, .seed = 7};
    s.arch = arch;
    s.n_expert = 8;
    s.n_expert_used = 2;
    const std::string path = dir.file(arch + ".gguf");
    LS_ASSERT_OK(write_example_model(path, s));
    LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
    const std::string a = arch == "mixtral" ? "llama" : arch;
    EXPECT_EQ(f.get_string("general.architecture").value(), a);
    EXPECT_EQ(f.get_u32(a + ".expert_count").value(), 8u);
    EXPECT_EQ(f.get_u32(a + ".expert_used_count").value(), 2u);
    EXPECT_EQ(f.has(a + ".expert_feed_forward_length"), arch == "qwen3moe");
    EXPECT_EQ(f.get_u32("general.file_type").value(), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate.weight"), nullptr);
    const GgufTensorInfo* router = f.find_tensor("blk.0.ffn_gate_inp.weight");
    ASSERT_NE(router, nullptr);
    EXPECT_EQ(router->dims, (std::vector<uint64_t>{256, 8}));
    EXPECT_EQ(router->type, GgmlType::F32);  // llama.cpp never quantises the router
    for (int i = 0; i < 4; ++i) {
      auto t = [&](const char* part) { return f.find_tensor(fmt::format("blk.{}.{}", i, part)); };
      ASSERT_NE(t("ffn_up_exps.weight"), nullptr);
      EXPECT_EQ(t("ffn_gate_exps.weight")->dims, (std::vector<uint64_t>{256, 256, 8}));
      EXPECT_EQ(t("ffn_down_exps.weight")->dims, (std::vector<uint64_t>{256, 256, 8}));
      EXPECT_EQ(t("ffn_gate_exps.weight")->type, GgmlType::Q4_K);
      EXPECT_EQ(t("ffn_up_exps.weight")->type, GgmlType::Q4_K);
      // Q4_K_M: ffn_down of the layers use_more_bits picks (of 4: 2 and 3) at Q6_K;
      // 8 experts: attn_k and attn_v at Q8_0.
      EXPECT_EQ(t("ffn_down_exps.weight")->type, i >= 2 ? GgmlType::Q6_K : GgmlType::Q4_K);
      EXPECT_EQ(t("attn_v.weight")->type, GgmlType::Q8_0);
      EXPECT_EQ(t("attn_k.weight")->type, GgmlType::Q8_0);
    }
    LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
    EXPECT_EQ(m.hparams.n_ff_exp, 256u);
  }
}

// gpt-oss as llama.cpp reads it: its keys, sinks, biases, post_attention_norm
// and no ffn_norm; the experts in MXFP4 with llama.cpp's MXFP4_MOE file type.
TEST(ExampleMoeModel, WritesGptOssWithMxfp4Experts) {
  testing::TempDir dir;
  ExampleModelSpec s{.n_layers = 2, .n_embd = 64, .n_ff = 96, .n_head = 4, .n_head_kv = 2, .n_vocab = 512,
                     .n_ctx = 256, .dtype = GgmlType::Q8_0, .seed = 3};
  s.arch = "gpt-oss";
  s.n_expert = 4;
  s.n_expert_used = 2;
  s.expert_dtype = GgmlType::MXFP4;
  const std::string path = dir.file("oss.gguf");
  LS_ASSERT_OK(write_example_model(path, s));
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
  EXPECT_EQ(f.get_u32("gpt-oss.expert_feed_forward_length").value(), 96u);
  EXPECT_EQ(f.get_u32("gpt-oss.attention.sliding_window").value(), 128u);  // llama.cpp requires one
  EXPECT_EQ(f.get_u32("general.file_type").value(), 38u);                  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
  EXPECT_EQ(f.find_tensor("blk.0.ffn_norm.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_down_exps.weight")->type, GgmlType::MXFP4);
  EXPECT_EQ(f.find_tensor("blk.1.attn_q.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(f.find_tensor("blk.1.attn_sinks.weight")->dims, (std::vector<uint64_t>{4}));
  EXPECT_EQ(f.find_tensor("blk.1.ffn_down_exps.bias")->dims, (std::vector<uint64_t>{64, 4}));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
  EXPECT_TRUE(m.hparams.traits.gpt_oss);
  EXPECT_TRUE(m.blocks[0].attn_q_bias && m.blocks[0].attn_output_bias && m.blocks[0].moe->up_bias);

  s.mix = ExampleMix::kQ4_K_M;
  s.dtype = GgmlType::Q4_K;
  EXPECT_TRUE(validate_example_spec(s).IsInvalidArgument());  // an expert type with a mix
  s.mix = ExampleMix::kUniform;
  s.n_ff = 80;
  const Status st = validate_example_spec(s);
  EXPECT_NE(st.message().find("multiples of 32 for expert type MXFP4"), std::string::npos) << st.ToString();
}

TEST(ExampleMoeModel, ExpertCountsAreChecked) {
  ExampleModelSpec s;
  s.arch = "qwen3moe";
  Status st = validate_example_spec(s);
  EXPECT_NE(st.message().find("experts = 0 must be > 0 for arch qwen3moe"), std::string::npos) << st.ToString();
  s.n_expert = 4;
  s.n_expert_used = 5;
  st = validate_example_spec(s);
  EXPECT_NE(st.message().find("experts-used = 5 must be in 1..4"), std::string::npos) << st.ToString();
  s.arch = "llama";
  s.n_expert_used = 2;
  st = validate_example_spec(s);
  EXPECT_NE(st.message().find("experts = 4 must be 0 for arch llama"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace layerstream

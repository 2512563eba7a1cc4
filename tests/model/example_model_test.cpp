// The example-model generator: a valid Llama file with the example tokenizer,
// deterministic bytes, sensible weight scales, and --size landing within 5%.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "kernels/math/convert_row.h"
#include "runtime/model/example_model.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/tokenizer/example_vocab.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

ExampleModelSpec small_spec(GgmlType dtype, uint64_t seed) {
  ExampleModelSpec s;
  s.n_layers = 3;
  s.n_embd = 128;
  s.n_ff = 320;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_vocab = 600;
  s.n_ctx = 512;
  s.dtype = dtype;
  s.seed = seed;
  return s;
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
  EXPECT_EQ(f.alignment(), 4096u);
  ASSERT_EQ(f.metadata().size(), layout.metadata().size());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    EXPECT_EQ(f.metadata()[i].key, layout.metadata()[i].key);
    EXPECT_TRUE(f.metadata()[i].value == layout.metadata()[i].value) << layout.metadata()[i].key;
  }
  ASSERT_EQ(f.tensors().size(), layout.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    GgufTensorInfo want = layout.tensors()[i];
    want.offset = layout.data_offset() + want.rel_offset;
    EXPECT_EQ(f.tensors()[i], want);
    EXPECT_EQ(f.tensors()[i].offset % 4096, 0u);
  }
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
                                           GgmlType::Q4_0, GgmlType::Q4_1),
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

// The Llama view: hyper-parameters, tensor sets, layer spans, architectures,
// tied output, and the tokenizer glue.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/tokenizer_gguf.h"
#include "tests/common/testing.h"
#include "tests/model/gguf_builder.h"

namespace layerstream {
namespace {

Result<GgufFile> parse(const std::vector<uint8_t>& bytes) {
  MemoryByteSource src(bytes, "model.gguf");
  return read_gguf(src);
}

TEST(LlamaModel, HyperParametersAndLayersFromTheFile) {
  std::mt19937_64 rng(testing::fresh_seed());
  const uint32_t n_layers = 1 + rng() % 5, heads = 4, kv = (rng() & 1) ? 2 : 4, e = 64 * (1 + rng() % 3);
  testing::GgufBuilder b = testing::llama_builder(n_layers, e, 96, heads, kv, 600);
  b.alignment = 64;
  b.add_u32("general.alignment", 64);
  testing::Layout layout;
  auto bytes = b.build(rng, &layout);
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, parse(bytes));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
  const LlamaHparams& h = m.hparams;
  EXPECT_EQ(h.arch, "llama");
  EXPECT_EQ(h.n_layers, n_layers);
  EXPECT_EQ(h.n_embd, e);
  EXPECT_EQ(h.n_ff, 96u);
  EXPECT_EQ(h.n_head, heads);
  EXPECT_EQ(h.n_head_kv, kv);
  EXPECT_EQ(h.head_dim, e / heads);
  EXPECT_EQ(h.n_rot, e / heads);
  EXPECT_EQ(h.n_vocab, 600u);
  EXPECT_EQ(h.n_ctx_train, 256u);
  EXPECT_FLOAT_EQ(h.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(h.rope_freq_base, 10000.0f);
  EXPECT_FALSE(h.rope_neox);
  EXPECT_FALSE(m.output_tied);

  ASSERT_EQ(m.layers.size(), n_layers + 2u);
  EXPECT_EQ(m.layers.front().kind, LayerKind::kEmbedding);
  EXPECT_EQ(m.layers.back().kind, LayerKind::kHead);
  uint64_t sum = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const ModelLayer& l = m.layers[i];
    uint64_t lo = UINT64_MAX, hi = 0, bytes_sum = 0;
    for (const auto& t : l.tensors) {
      lo = std::min(lo, t.offset);
      hi = std::max(hi, t.end());
      bytes_sum += t.n_bytes;
      EXPECT_EQ(f.find_tensor(t.name)->offset, t.offset);
    }
    EXPECT_EQ(l.span_begin, lo) << l.name;
    EXPECT_EQ(l.span_end, hi) << l.name;
    EXPECT_EQ(l.tensor_bytes, bytes_sum);
    EXPECT_EQ(l.aligned_begin % kDirectIoAlignment, 0u);
    EXPECT_EQ(l.aligned_end % kDirectIoAlignment, 0u);
    EXPECT_LE(l.aligned_begin, l.span_begin);
    EXPECT_GE(l.aligned_end, l.span_end);
    EXPECT_LT(l.span_begin - l.aligned_begin, kDirectIoAlignment);
    EXPECT_LT(l.aligned_end - l.span_end, kDirectIoAlignment);
    sum += l.tensor_bytes;
    ASSERT_EQ(l.ranges.size(), 1u) << l.name;
    EXPECT_EQ(l.ranges[0].begin, l.span_begin);
    EXPECT_EQ(l.ranges[0].end, l.span_end);
    EXPECT_EQ(l.ranges[0].aligned_begin, l.aligned_begin);
    if (l.kind == LayerKind::kBlock) {
      EXPECT_EQ(l.name, "blk." + std::to_string(l.block));
      EXPECT_EQ(l.tensors.size(), 9u);
      // Consecutive layers' spans do not overlap (the builder writes them in order).
      EXPECT_GE(l.span_begin, m.layers[i - 1].span_end);
    }
  }
  EXPECT_EQ(sum, m.total_tensor_bytes);
  EXPECT_EQ(m.blocks.at(0).attn_k.dims, (std::vector<uint64_t>{e, uint64_t{kv} * (e / heads)}));
}

TEST(LlamaModel, TiedOutputUsesTheEmbedding) {
  std::mt19937_64 rng(testing::fresh_seed());
  auto b = testing::llama_builder();
  b.erase_tensor("output.weight");
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, parse(b.build(rng)));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
  EXPECT_TRUE(m.output_tied);
  EXPECT_EQ(m.output, m.token_embd);
  const ModelLayer& head = m.layers.back();
  ASSERT_EQ(head.tensors.size(), 2u);
  EXPECT_EQ(head.tensors[1].name, "token_embd.weight");
  // Two ranges: token_embd at the start of the data, output_norm at the end.
  ASSERT_EQ(head.ranges.size(), 2u);
  EXPECT_EQ(head.ranges[0].begin, m.token_embd.offset);
  EXPECT_EQ(head.ranges[0].end, m.token_embd.end());
  EXPECT_EQ(head.ranges[1].begin, m.output_norm.offset);
  EXPECT_EQ(head.ranges[1].end, m.output_norm.end());
  // The embedding is counted once.
  uint64_t sum = 0;
  for (const auto& t : f.tensors()) sum += t.n_bytes;
  EXPECT_EQ(m.total_tensor_bytes, sum);
}

TEST(LlamaModel, Qwen2WithBiasesUsesNeoxRope) {
  std::mt19937_64 rng(testing::fresh_seed());
  auto b = testing::llama_builder(2, 64, 128, 4, 2, 512, "qwen2");
  for (int i = 0; i < 2; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.tensors.push_back({p + "attn_q.bias", {64}, 0});
    b.tensors.push_back({p + "attn_k.bias", {32}, 0});
    b.tensors.push_back({p + "attn_v.bias", {32}, 0});
  }
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, parse(b.build(rng)));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
  EXPECT_TRUE(m.hparams.rope_neox);
  ASSERT_TRUE(m.blocks[1].attn_k_bias.has_value());
  EXPECT_EQ(m.blocks[1].attn_k_bias->name, "blk.1.attn_k.bias");
  EXPECT_EQ(m.layers[2].tensors.size(), 12u);
  // A misshapen bias is an error naming it.
  b.tensor("blk.0.attn_v.bias")->dims = {64};
  LS_ASSERT_OK_AND_ASSIGN(GgufFile bad, parse(b.build(rng)));
  Status s = load_llama_model(bad).status();
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("blk.0.attn_v.bias"), std::string::npos) << s.message();
}

TEST(LlamaModel, MistralAndRopeScalingAreRead) {
  std::mt19937_64 rng(testing::fresh_seed());
  auto b = testing::llama_builder(1, 64, 128, 4, 4, 512, "mistral");
  b.add_str("mistral.rope.scaling.type", "linear");
  b.add_f32("mistral.rope.scaling.factor", 4.0f);
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, parse(b.build(rng)));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
  EXPECT_EQ(m.hparams.arch, "mistral");
  EXPECT_FALSE(m.hparams.rope_neox);
  EXPECT_EQ(m.hparams.rope_scaling_type, "linear");
  EXPECT_FLOAT_EQ(m.hparams.rope_scaling_factor, 4.0f);
}

TEST(TokenizerGguf, MissingTokenizerIsNotFound) {
  std::mt19937_64 rng(testing::fresh_seed());
  auto b = testing::llama_builder();
  b.erase_kv("tokenizer.ggml.model");
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, parse(b.build(rng)));
  Status s = read_tokenizer_vocab(f).status();
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_NE(s.message().find("model has no tokenizer (tokenizer.ggml.model missing)"), std::string::npos);
}

TEST(TokenizerGguf, ReadsTokensAndSpecialIds) {
  std::mt19937_64 rng(testing::fresh_seed());
  auto b = testing::llama_builder();
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, parse(b.build(rng)));
  LS_ASSERT_OK_AND_ASSIGN(TokenizerVocab v, read_tokenizer_vocab(f));
  EXPECT_EQ(v.model, "llama");
  ASSERT_EQ(v.tokens.size(), 512u);
  EXPECT_EQ(v.tokens[37], "t37");
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_FALSE(v.unk_id.has_value());
  b.set("tokenizer.ggml.model", 8, testing::GgufBuilder::str("bert"));
  LS_ASSERT_OK_AND_ASSIGN(GgufFile g, parse(b.build(rng)));
  EXPECT_TRUE(read_tokenizer_vocab(g).status().IsUnsupported());
}

}  // namespace
}  // namespace layerstream

namespace layerstream {
namespace {

// ---- mixtures of experts -----------------------------------------------------

Result<GgufFile> parse_moe(const testing::GgufBuilder& b) {
  std::mt19937_64 rng(1);
  MemoryByteSource src(b.build(rng), "moe.gguf");
  return read_gguf(src);
}

// The loader's error for a built file: its code, and that its message names `what`.
void expect_refused(const testing::GgufBuilder& b, const std::string& what, bool (Status::*is)() const) {
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, parse_moe(b));
  const Status s = load_llama_model(f).status();
  EXPECT_TRUE((s.*is)()) << s.ToString();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
}

TEST(MoeModel, ExpertsAreReadAndEachExpertSliceIsAddressable) {
  for (const std::string arch : {"qwen3moe", "llama"}) {
    SCOPED_TRACE(arch);
    LS_ASSERT_OK_AND_ASSIGN(GgufFile f, parse_moe(testing::moe_builder(arch, 8, 2)));
    LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
    EXPECT_TRUE(m.hparams.is_moe());
    EXPECT_EQ(m.hparams.n_expert, 8u);
    EXPECT_EQ(m.hparams.n_expert_used, 2u);
    EXPECT_EQ(m.hparams.n_ff_exp, 32u);
    EXPECT_EQ(m.hparams.rope_neox, arch == "qwen3moe");
    ASSERT_TRUE(m.blocks[1].moe.has_value());
    const MoeTensors& x = *m.blocks[1].moe;
    EXPECT_EQ(x.gate_exps.name, "blk.1.ffn_gate_exps.weight");
    EXPECT_EQ(m.blocks[1].matrices().size(), 4u);  // Q, K, V, O: the FFN is the experts
    // The expert tensors are part of the block's layer (placed and streamed with it).
    const ModelLayer& l = m.layers[2];
    for (const GgufTensorInfo* t : {&x.router, &x.gate_exps, &x.up_exps, &x.down_exps}) {
      EXPECT_NE(std::find(l.tensors.begin(), l.tensors.end(), *t), l.tensors.end()) << t->name;
      EXPECT_GE(t->offset, l.span_begin);
      EXPECT_LE(t->end(), l.span_end);
    }
    // Expert e's matrix: the e-th of 8 equal, contiguous slices (Q8_0 rows of 64: 68 bytes).
    const uint64_t slice = 32 * 68;
    EXPECT_EQ(x.gate_exps.n_bytes, 8 * slice);
    for (uint32_t e = 0; e < 8; ++e) {
      const ExpertSlice s = expert_slice(x.gate_exps, e);
      EXPECT_EQ(s.offset, x.gate_exps.offset + e * slice);
      EXPECT_EQ(s.bytes, slice);
    }
  }
}

TEST(MoeModel, BadExpertKeysAreNamed) {
  auto zero = testing::moe_builder("qwen3moe", 8, 2);
  zero.set("qwen3moe.expert_count", 4, {0, 0, 0, 0});
  expect_refused(zero, "qwen3moe.expert_count = 0", &Status::IsCorruption);

  auto zero_llama = testing::moe_builder("llama", 8, 2);
  zero_llama.set("llama.expert_count", 4, {0, 0, 0, 0});
  expect_refused(zero_llama, "llama.expert_count = 0", &Status::IsCorruption);

  auto missing = testing::moe_builder("llama", 8, 2);
  missing.erase_kv("llama.expert_count");
  expect_refused(missing, "key 'llama.expert_count' is missing", &Status::IsNotFound);

  auto too_many_used = testing::moe_builder("qwen3moe", 8, 9);
  expect_refused(too_many_used, "qwen3moe.expert_used_count = 9 must be in 1..8", &Status::IsCorruption);

  auto none_used = testing::moe_builder("llama", 8, 0);
  expect_refused(none_used, "llama.expert_used_count = 0", &Status::IsCorruption);

  auto shared = testing::moe_builder("qwen3moe", 8, 2);
  shared.add_u32("qwen3moe.expert_shared_count", 1);
  expect_refused(shared, "qwen3moe.expert_shared_count", &Status::IsUnsupported);
}

TEST(MoeModel, BadExpertTensorsAreNamed) {
  auto shape = testing::moe_builder("qwen3moe", 8, 2);
  shape.tensor("blk.1.ffn_up_exps.weight")->dims = {64, 32, 7};
  expect_refused(shape, "tensor 'blk.1.ffn_up_exps.weight' has shape [64, 32, 7]; expected [64, 32, 8]",
                 &Status::IsCorruption);

  auto flat = testing::moe_builder("llama", 4, 2);
  flat.tensor("blk.0.ffn_down_exps.weight")->dims = {32, 64};
  expect_refused(flat, "blk.0.ffn_down_exps.weight", &Status::IsCorruption);

  auto router = testing::moe_builder("llama", 4, 2);
  router.tensor("blk.0.ffn_gate_inp.weight")->dims = {64, 5};
  expect_refused(router, "blk.0.ffn_gate_inp.weight", &Status::IsCorruption);

  auto missing = testing::moe_builder("qwen3moe", 4, 2);
  missing.erase_tensor("blk.1.ffn_gate_exps.weight");
  expect_refused(missing, "tensor 'blk.1.ffn_gate_exps.weight' is missing", &Status::IsNotFound);

  // An expert type layerstream does not compute (Q8_1, an activation type): the reader names the tensor.
  auto q8_1 = testing::moe_builder("qwen3moe", 4, 2);
  q8_1.tensor("blk.0.ffn_down_exps.weight")->type = static_cast<uint32_t>(GgmlType::Q8_1);
  const Status s = parse_moe(q8_1).status();
  EXPECT_TRUE(s.IsUnsupported()) << s.ToString();
  EXPECT_NE(s.message().find("tensor 'blk.0.ffn_down_exps.weight': unsupported tensor type Q8_1"), std::string::npos)
      << s.message();
}

TEST(MoeModel, GptOssReadsSinksBiasesAndAlternateWindows) {
  auto b = testing::gpt_oss_builder(4, 2, /*n_layers=*/4);
  b.tensor("blk.1.ffn_up_exps.weight")->type = static_cast<uint32_t>(GgmlType::MXFP4);  // as gpt-oss ships them
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, parse_moe(b));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
  const LlamaHparams& h = m.hparams;
  EXPECT_TRUE(h.traits.gpt_oss && h.rope_neox);
  EXPECT_EQ(h.traits.ffn, FfnActivation::kSwigluOai);
  EXPECT_EQ(h.n_swa, 128u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(h.is_swa(i), i % 2 == 0) << "layer " << i;
  EXPECT_EQ(h.rope_base(0), h.rope_base(1)) << "local layers keep the global RoPE base";
  const LlamaBlock& blk = m.blocks[1];
  ASSERT_TRUE(blk.attn_sinks && blk.attn_output_bias && blk.moe);
  EXPECT_EQ(blk.ffn_norm.name, "blk.1.post_attention_norm.weight");
  EXPECT_EQ(blk.moe->up_exps.type, GgmlType::MXFP4);
  ASSERT_TRUE(blk.moe->router_bias && blk.moe->gate_bias && blk.moe->up_bias && blk.moe->down_bias);
  EXPECT_EQ(blk.moe->down_bias->dims, (std::vector<uint64_t>{64, 4}));
  // The biases and sinks are part of the block's bytes (placed and streamed with it).
  const ModelLayer& layer = m.layers[2];
  for (const GgufTensorInfo* t : {&*blk.attn_sinks, &*blk.moe->down_bias}) {
    EXPECT_TRUE(std::any_of(layer.tensors.begin(), layer.tensors.end(), [&](const GgufTensorInfo& x) { return x.name == t->name; }))
        << t->name;
  }
}

TEST(MoeModel, BadGptOssFilesNameTheKeyOrTensor) {
  auto no_window = testing::gpt_oss_builder(4, 2);
  no_window.erase_kv("gpt-oss.attention.sliding_window");
  expect_refused(no_window, "key 'gpt-oss.attention.sliding_window' is missing", &Status::IsNotFound);

  auto no_sinks = testing::gpt_oss_builder(4, 2);
  no_sinks.erase_tensor("blk.1.attn_sinks.weight");
  expect_refused(no_sinks, "tensor 'blk.1.attn_sinks.weight' is missing", &Status::IsNotFound);

  auto bad_bias = testing::gpt_oss_builder(4, 2);
  bad_bias.tensor("blk.0.ffn_gate_exps.bias")->dims = {32, 3};
  expect_refused(bad_bias, "blk.0.ffn_gate_exps.bias", &Status::IsCorruption);

  auto f16_sinks = testing::gpt_oss_builder(4, 2);
  f16_sinks.tensor("blk.0.attn_sinks.weight")->type = static_cast<uint32_t>(GgmlType::F16);
  expect_refused(f16_sinks, "norms and biases must be F32", &Status::IsUnsupported);

  auto yarn = testing::gpt_oss_builder(4, 2);
  yarn.add_str("gpt-oss.rope.scaling.type", "yarn");
  expect_refused(yarn, "'yarn' is not implemented for architecture 'gpt-oss'", &Status::IsUnsupported);
}

}  // namespace
}  // namespace layerstream

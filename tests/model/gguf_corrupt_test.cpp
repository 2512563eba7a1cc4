// The corrupt-file suite: every case starts from a valid small Llama model
// built in the test, applies one corruption, and checks the specific error
// (status code and the words of its message). Nothing may crash.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "tests/common/testing.h"
#include "tests/model/gguf_builder.h"

namespace layerstream {
namespace {

using testing::GgufBuilder;
using testing::Layout;

// Parses and, when that succeeds, builds the Llama view.
Status load_all(const std::vector<uint8_t>& bytes) {
  MemoryByteSource src(bytes, "corrupt.gguf");
  Result<GgufFile> f = read_gguf(src);
  if (!f.ok()) return f.status();
  Result<LlamaModel> m = load_llama_model(*f);
  return m.ok() ? Status::OK() : m.status();
}

template <typename T>
void patch(std::vector<uint8_t>& b, uint64_t at, T v) {
  ASSERT_LE(at + sizeof(T), b.size());
  std::memcpy(&b[at], &v, sizeof(T));
}

struct Case {
  const char* name;
  std::function<void(GgufBuilder&)> edit_builder;                            // may be empty
  std::function<void(std::vector<uint8_t>&, const Layout&)> edit_bytes;      // may be empty
  StatusCode code;
  std::vector<std::string> words;
};

uint64_t tensor_index(const GgufBuilder& b, const std::string& name) {
  for (size_t i = 0; i < b.tensors.size(); ++i) if (b.tensors[i].name == name) return i;
  return 0;
}
// Offset of a named key's value-type field in the built file.
uint64_t kv_type_at(const GgufBuilder& b, const Layout& l, const std::string& key) {
  for (size_t i = 0; i < b.kvs.size(); ++i) if (b.kvs[i].key == key) return l.kv_starts[i] + 8 + key.size();
  return 0;
}
std::vector<uint8_t> u32_bytes(uint32_t v) { std::vector<uint8_t> b; GgufBuilder::put(b, v); return b; }

std::vector<Case> cases() {
  const auto C = StatusCode::kCorruption, U = StatusCode::kUnsupported, N = StatusCode::kNotFound;
  using B = GgufBuilder;
  std::vector<Case> v;
  v.push_back({"bad_magic", {}, [](auto& b, auto&) { b[0] = 'X'; }, C, {"bad magic", "not a GGUF"}});
  v.push_back({"version_1", {}, [](auto& b, auto&) { patch<uint32_t>(b, 4, 1); }, U, {"version 1", "supported: 2, 3"}});
  v.push_back({"byte_swapped", {}, [](auto& b, auto&) { patch<uint32_t>(b, 4, 0x03000000); }, U, {"byte-swapped"}});
  v.push_back({"tensor_count_overflow", {}, [](auto& b, auto&) { patch<uint64_t>(b, 8, ~0ull / 2); }, C,
               {"tensor count", "cannot fit", "at byte 8"}});
  v.push_back({"kv_count_overflow", {}, [](auto& b, auto&) { patch<uint64_t>(b, 16, 1ull << 40); }, C,
               {"metadata key count", "cannot fit"}});
  v.push_back({"string_over_1GiB", {}, [](auto& b, auto& l) { patch<uint64_t>(b, l.kv_starts[0], 1ull << 31); }, C,
               {"string length 2147483648", "exceeds the limit of 1073741824"}});
  v.push_back({"string_past_eof", {}, [](auto& b, auto& l) { patch<uint64_t>(b, l.kv_starts[0], b.size()); }, C,
               {"string length", "past the end"}});
  v.push_back({"array_count_over_limit", {},
               [](auto& b, auto& l) { patch<uint64_t>(b, l.kv_starts[10] + 8 + 21 + 4 + 4, (1ull << 30) + 1); }, C,
               {"tokenizer.ggml.tokens", "1073741825 elements", "exceeds the limit"}});
  v.push_back({"array_bytes_past_eof", [](B& b) { b.set("big", 9, [] { std::vector<uint8_t> x; B::put<uint32_t>(x, 4); B::put<uint64_t>(x, 1u << 29); return x; }()); },
               {}, C, {"'big'", "536870912 x UINT32", "remain"}});
  v.push_back({"nested_array", [](B& b) { b.set("nest", 9, [] { std::vector<uint8_t> x; B::put<uint32_t>(x, 9); B::put<uint64_t>(x, 1); return x; }()); },
               {}, C, {"nested arrays", "'nest'"}});
  v.push_back({"unknown_value_type", [](B& b) { b.set("weird", 13, u32_bytes(0)); }, {}, C, {"unknown value type 13", "'weird'"}});
  v.push_back({"array_of_unknown_type", [](B& b) { b.set("weird", 9, [] { std::vector<uint8_t> x; B::put<uint32_t>(x, 77); B::put<uint64_t>(x, 0); return x; }()); },
               {}, C, {"array of unknown value type 77"}});
  v.push_back({"empty_key", [](B& b) { b.add_u32("", 1); }, {}, C, {"is empty"}});
  v.push_back({"duplicate_key", [](B& b) { b.add_u32("llama.block_count", 2); }, {}, C,
               {"duplicate metadata key 'llama.block_count'"}});
  v.push_back({"empty_tensor_name", [](B& b) { b.tensors[3].name = ""; }, {}, C, {"tensor #3", "empty name"}});
  v.push_back({"tensor_name_too_long", [](B& b) { b.tensors[2].name = std::string(64, 'x'); }, {}, C,
               {"64 bytes long", "limit 63"}});
  v.push_back({"duplicate_tensor_name", [](B& b) { b.tensors[5].name = b.tensors[4].name; }, {}, C,
               {"duplicate tensor name", "blk.0.attn_v.weight"}});
  v.push_back({"n_dims_5", [](B& b) { b.tensors[1].dims = {64, 1, 1, 1, 1}; }, {}, C, {"n_dims = 5", "1..4"}});
  v.push_back({"n_dims_0", [](B& b) { b.tensors[1].dims = {}; }, {}, C, {"n_dims = 0"}});
  v.push_back({"zero_dim", [](B& b) { b.tensors[2].dims = {64, 0}; }, {}, C, {"ne1 = 0", "must be positive"}});
  v.push_back({"negative_dim", [](B& b) { b.tensors[2].dims = {64, ~0ull}; }, {}, C, {"ne1 = -1"}});
  v.push_back({"dims_product_overflow", [](B& b) { b.tensors[2].dims = {1ull << 32, 1ull << 32}; }, {}, C,
               {"blk.0.attn_q.weight", "overflows"}});
  v.push_back({"size_wraps_when_padded", [](B& b) { b.tensors[1].dims = {(1ull << 62) - 1}; }, {}, C,
               {"overflows when padded"}});
  v.push_back({"unknown_tensor_type", [](B& b) { b.tensors[2].type = 99; }, {}, C, {"unknown type id 99"}});
  v.push_back({"retired_tensor_type", [](B& b) { b.tensors[2].type = 4; }, {}, C, {"retired type id 4"}});
  v.push_back({"unsupported_iq2_xxs", [](B& b) { b.tensors[2].type = 16; b.tensors[2].dims = {256, 64}; }, {}, U,
               {"unsupported tensor type IQ2_XXS (id 16)", "blk.0.attn_q.weight"}});
  v.push_back({"ne0_not_multiple_of_block", [](B& b) { b.tensors[2].type = 8; b.tensors[2].dims = {48, 64}; }, {}, C,
               {"ne0 = 48", "multiple of the Q8_0 block size 32"}});
  v.push_back({"misaligned_offset", [](B& b) { b.tensors[3].offset = 36; }, {}, C,
               {"offset 36", "alignment 32"}});
  v.push_back({"tensor_past_eof", [](B& b) { b.tensors.back().offset = 1ull << 40; }, {}, C,
               {"output.weight", "past the end"}});
  v.push_back({"offset_add_overflow", [](B& b) { b.tensors.back().offset = ~0ull - 31; }, {}, C, {"past the end"}});
  v.push_back({"overlapping_tensors", [](B& b) { b.tensors[4].offset = 0; }, {}, C, {"overlaps", "token_embd.weight"}});
  v.push_back({"alignment_wrong_type", [](B& b) { b.add_str("general.alignment", "32"); }, {}, C,
               {"general.alignment", "STRING", "expected UINT32"}});
  v.push_back({"alignment_zero", [](B& b) { b.add_u32("general.alignment", 0); }, {}, C, {"= 0", "power of two"}});
  v.push_back({"alignment_not_pow2", [](B& b) { b.add_u32("general.alignment", 48); }, {}, C, {"= 48", "power of two"}});
  v.push_back({"alignment_too_small", [](B& b) { b.add_u32("general.alignment", 4); b.alignment = 4; }, {}, C,
               {"= 4", "outside", "8..65536"}});
  v.push_back({"alignment_too_big", [](B& b) { b.add_u32("general.alignment", 1u << 17); }, {}, C,
               {"= 131072", "outside"}});
  v.push_back({"bos_outside_vocab", [](B& b) { b.set("tokenizer.ggml.bos_token_id", 4, u32_bytes(512)); }, {}, C,
               {"bos_token_id = 512", "outside the vocabulary", "0..511"}});
  v.push_back({"eos_not_integer", [](B& b) { b.set("tokenizer.ggml.eos_token_id", 8, B::str("2")); }, {}, C,
               {"eos_token_id", "STRING"}});
  v.push_back({"scores_wrong_length", [](B& b) { b.set("tokenizer.ggml.scores", 9, [] { std::vector<uint8_t> x; B::put<uint32_t>(x, 6); B::put<uint64_t>(x, 1); B::put<float>(x, 0.f); return x; }()); },
               {}, C, {"tokenizer.ggml.scores", "512 elements"}});
  v.push_back({"missing_tensor", [](B& b) { b.erase_tensor("blk.1.ffn_up.weight"); }, {}, N,
               {"blk.1.ffn_up.weight", "missing"}});
  v.push_back({"missing_embedding", [](B& b) { b.erase_tensor("token_embd.weight"); }, {}, N, {"token_embd.weight"}});
  v.push_back({"misshapen_tensor", [](B& b) { b.tensor("blk.0.attn_k.weight")->dims = {64, 64}; }, {}, C,
               {"blk.0.attn_k.weight", "shape [64, 64]", "expected [64, 32]"}});
  v.push_back({"norm_not_f32", [](B& b) { b.tensor("blk.0.ffn_norm.weight")->type = 1; }, {}, U,
               {"blk.0.ffn_norm.weight", "must be F32"}});
  v.push_back({"unsupported_arch", [](B& b) { b.set("general.architecture", 8, B::str("gpt2")); }, {}, U,
               {"architecture 'gpt2'", "not supported"}});
  v.push_back({"missing_block_count", [](B& b) { b.erase_kv("llama.block_count"); }, {}, N, {"llama.block_count", "missing"}});
  v.push_back({"block_count_wrong_type", [](B& b) { b.set("llama.block_count", 8, B::str("2")); }, {}, C,
               {"llama.block_count", "STRING"}});
  v.push_back({"zero_heads", [](B& b) { b.set("llama.attention.head_count", 4, u32_bytes(0)); }, {}, C,
               {"head_count = 0", "> 0"}});
  v.push_back({"heads_not_dividing", [](B& b) { b.set("llama.attention.head_count", 4, u32_bytes(3)); }, {}, C,
               {"head_count = 3", "does not divide embedding_length 64"}});
  v.push_back({"kv_heads_not_dividing", [](B& b) { b.set("llama.attention.head_count_kv", 4, u32_bytes(3)); }, {}, C,
               {"head_count_kv = 3", "does not divide head_count 4"}});
  v.push_back({"zero_context", [](B& b) { b.set("llama.context_length", 4, u32_bytes(0)); }, {}, C,
               {"context_length = 0"}});
  v.push_back({"vocab_mismatch", [](B& b) { b.set("llama.vocab_size", 4, u32_bytes(1000)); }, {}, C,
               {"vocab_size = 1000", "does not match"}});
  v.push_back({"more_blocks_than_tensors", [](B& b) { b.set("llama.block_count", 4, u32_bytes(3)); }, {}, N,
               {"blk.2.attn_norm.weight", "missing"}});
  return v;
}

class CorruptFileTest : public ::testing::TestWithParam<Case> {};

TEST_P(CorruptFileTest, GivesTheSpecificError) {
  const Case& c = GetParam();
  std::mt19937_64 rng(testing::fresh_seed());
  GgufBuilder b = testing::llama_builder();
  ASSERT_TRUE(load_all(b.build(rng)).ok()) << "the base file must be valid";
  if (c.edit_builder) c.edit_builder(b);
  Layout layout;
  std::vector<uint8_t> bytes = b.build(rng, &layout);
  if (c.edit_bytes) c.edit_bytes(bytes, layout);
  Status s = load_all(bytes);
  ASSERT_FALSE(s.ok()) << c.name << " was accepted";
  EXPECT_EQ(s.code(), c.code) << s.ToString();
  for (const auto& w : c.words) EXPECT_NE(s.message().find(w), std::string::npos) << "'" << w << "' not in: " << s.message();
}

INSTANTIATE_TEST_SUITE_P(Corruptions, CorruptFileTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// The cases are distinct corruptions, told apart by the loader: at least 20
// of them, each with its own name and its own error message.
TEST(CorruptFileSuite, AtLeastTwentyCorruptionsGiveDistinctErrors) {
  std::mt19937_64 rng(testing::fresh_seed());
  std::set<std::string> names, messages;
  for (const Case& c : cases()) {
    EXPECT_TRUE(names.insert(c.name).second) << "two cases named " << c.name;
    GgufBuilder b = testing::llama_builder();
    if (c.edit_builder) c.edit_builder(b);
    Layout l;
    auto bytes = b.build(rng, &l);
    if (c.edit_bytes) c.edit_bytes(bytes, l);
    EXPECT_TRUE(messages.insert(load_all(bytes).message()).second) << c.name << " repeats another case's error";
  }
  EXPECT_GE(messages.size(), 20u);
}

TEST(CorruptFileSuite, EveryErrorNamesTheFile) {
  std::mt19937_64 rng(testing::fresh_seed());
  for (const Case& c : cases()) {
    GgufBuilder b = testing::llama_builder();
    if (c.edit_builder) c.edit_builder(b);
    Layout l;
    auto bytes = b.build(rng, &l);
    if (c.edit_bytes) c.edit_bytes(bytes, l);
    Status s = load_all(bytes);
    EXPECT_NE(s.message().find("corrupt.gguf"), std::string::npos) << c.name << ": " << s.message();
  }
}

// Every prefix of the metadata and tensor-info region, plus every structural
// boundary in the data, must be rejected as truncated, never crash.
TEST(CorruptFileSuite, TruncationAtEveryBoundaryIsCorruption) {
  std::mt19937_64 rng(testing::fresh_seed());
  GgufBuilder b = testing::llama_builder(1, 64, 128, 4, 2, 512);
  Layout l;
  const auto full = b.build(rng, &l);
  std::vector<uint64_t> cuts;
  for (uint64_t n = 0; n < l.infos_end; ++n) cuts.push_back(n);
  for (size_t i = 0; i < l.tensor_data.size(); ++i) {
    cuts.push_back(l.tensor_data[i]);
    cuts.push_back(l.tensor_data[i] + l.tensor_bytes[i] - 1);
  }
  for (uint64_t n : cuts) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    MemoryByteSource src(cut, "cut.gguf");
    Result<GgufFile> f = read_gguf(src);
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes was accepted";
    ASSERT_TRUE(f.status().IsCorruption()) << n << ": " << f.status().ToString();
    const std::string& m = f.status().message();
    EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("past the end") != std::string::npos ||
                m.find("cannot fit") != std::string::npos || m.find("remain") != std::string::npos)
        << n << ": " << m;
  }
}

// Random byte flips in the structured part: any outcome but a crash or hang
// (run under address+undefined sanitizers in CI).
TEST(CorruptFileSuite, RandomByteFlipsNeverCrash) {
  std::mt19937_64 rng(testing::fresh_seed());
  GgufBuilder b = testing::llama_builder(1, 64, 128, 4, 2, 512);
  Layout l;
  const auto full = b.build(rng, &l);
  int rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    auto bytes = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % l.infos_end] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (!load_all(bytes).ok()) ++rejected;
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace layerstream

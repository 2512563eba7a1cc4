// Reading llama-imatrix's GGUF (runtime/model/imatrix.h): importances are
// in_sum2 / counts per expert matrix (1 where nothing was counted), and
// malformed files are refused with the entry named.
#include <string>
#include <vector>

#include "runtime/model/gguf_writer.h"
#include "runtime/model/imatrix.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

struct Entry {
  std::string tensor;
  std::vector<uint64_t> dims;
  std::vector<float> values;
};

void write_file(const std::string& path, const std::vector<Entry>& entries, bool with_keys = true) {
  GgufWriter w;
  if (with_keys) {
    ASSERT_TRUE(w.add("imatrix.datasets", GgufValue::string_array({"calib.txt"})).ok());
    ASSERT_TRUE(w.add("imatrix.chunk_count", GgufValue::u32(10)).ok());
    ASSERT_TRUE(w.add("imatrix.chunk_size", GgufValue::u32(512)).ok());
  }
  for (const auto& e : entries) ASSERT_TRUE(w.add_tensor(e.tensor, e.dims, GgmlType::F32).ok());
  ASSERT_TRUE(w.write(path, [&](size_t i, const GgufTensorInfo&, TensorSink& sink) {
                 return sink.write(entries[i].values.data(), entries[i].values.size() * sizeof(float));
               }).ok());
}

TEST(Imatrix, ImportanceIsSumOverCountPerExpert) {
  testing::TempDir dir;
  const std::string path = dir.file("im.gguf");
  // Two expert matrices of 32 columns: 4 tokens reached the first, none the second.
  std::vector<float> sums(64);
  for (size_t j = 0; j < sums.size(); ++j) sums[j] = static_cast<float>(j);
  write_file(path, {{"blk.0.ffn_down_exps.weight.in_sum2", {32, 2}, sums},
                    {"blk.0.ffn_down_exps.weight.counts", {1, 2}, {4.0f, 0.0f}},
                    {"blk.0.attn_q.weight.in_sum2", {32, 1}, std::vector<float>(32, 6.0f)},
                    {"blk.0.attn_q.weight.counts", {1, 1}, {3.0f}}});
  auto m = read_imatrix_file(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->chunk_count, 10u);
  EXPECT_EQ(m->chunk_size, 512u);
  EXPECT_EQ(m->datasets, std::vector<std::string>{"calib.txt"});
  const std::vector<float>* e = m->find("blk.0.ffn_down_exps.weight");
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->size(), 64u);
  for (size_t j = 0; j < 32; ++j) EXPECT_FLOAT_EQ((*e)[j], static_cast<float>(j) / 4);
  for (size_t j = 32; j < 64; ++j) EXPECT_EQ((*e)[j], 1.0f);
  const std::vector<float>* q = m->find("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  for (float v : *q) EXPECT_FLOAT_EQ(v, 2.0f);
  EXPECT_EQ(m->find("blk.1.attn_q.weight"), nullptr);
}

TEST(Imatrix, MalformedFilesAreRefused) {
  testing::TempDir dir;
  struct Case {
    std::vector<Entry> entries;
    bool keys;
    std::string words;
  };
  const std::vector<Case> cases = {
      {{{"a.weight.in_sum2", {32, 1}, std::vector<float>(32, 1.0f)}}, true, "has .in_sum2 but no .counts"},
      {{{"a.weight.in_sum2", {30, 1}, std::vector<float>(30, 1.0f)}, {"a.weight.counts", {1, 4}, {1, 1, 1, 1}}},
       true,
       "not whole rows"},
      {{{"a.weight.in_sum2", {32, 1}, std::vector<float>(32, -1.0f)}, {"a.weight.counts", {1, 1}, {1}}},
       true,
       "finite sum of squares"},
      {{{"a.weight.in_sum2", {32, 1}, std::vector<float>(32, 1.0f)}, {"a.weight.counts", {1, 1}, {1}}},
       false,
       "not an importance matrix"},
      {{{"unrelated.weight", {32, 1}, std::vector<float>(32, 1.0f)}}, true, "holds no entry"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir.file("bad" + std::to_string(i) + ".gguf");
    write_file(path, cases[i].entries, cases[i].keys);
    auto m = read_imatrix_file(path);
    ASSERT_FALSE(m.ok()) << i;
    EXPECT_NE(m.status().message().find(cases[i].words), std::string::npos) << i << ": " << m.status().message();
  }
  EXPECT_FALSE(read_imatrix_file(dir.file("missing.gguf")).ok());
}

}  // namespace
}  // namespace layerstream

// Collecting importance matrices (runtime/model/imatrix_collector.h) and the
// runner's matmul-input observer that feeds them (RunnerOptions::matmul_inputs):
// the sums equal float64 references (random rows; and a real pass of the tiny
// model, whose first attention input is recomputed here from the file's
// embedding rows and norm), the file reads back with our own imatrix reader
// and holds llama-imatrix's tensors and keys, and bad input is refused.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/math/convert_row.h"
#include "runtime/llama/llama_runner.h"
#include "runtime/model/byte_source.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/imatrix.h"
#include "runtime/model/imatrix_collector.h"
#include "runtime/model/llama_model.h"
#include "tests/common/testing.h"
#include "tests/common/tiny_model.h"

namespace layerstream {
namespace {

GgufTensorInfo weight(const std::string& name, uint64_t n_in, uint64_t n_out) {
  GgufTensorInfo t;
  t.name = name;
  t.dims = {n_in, n_out};
  t.type = GgmlType::F16;
  return t;
}

std::vector<float> read_f32_tensor(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  EXPECT_EQ(t->type, GgmlType::F32) << name;
  auto src = FileByteSource::open(f.path());
  EXPECT_TRUE(src.ok());
  std::vector<float> v(t->n_elements());
  EXPECT_TRUE((*src)->read_at(t->offset, v.data(), v.size() * sizeof(float)).ok());
  return v;
}

TEST(ImatrixCollect, SumsOfSquaresMatchFloat64AndReadBack) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const GgufTensorInfo q = weight("blk.0.attn_q.weight", 96, 64), k = weight("blk.0.attn_k.weight", 96, 32),
                       down = weight("blk.0.ffn_down.weight", 160, 96);
  const GgufTensorInfo* qk[] = {&q, &k};
  const GgufTensorInfo* d[] = {&down};
  ImatrixCollector c;
  std::vector<double> ref_qk(96, 0.0), ref_down(160, 0.0);
  for (int call = 0; call < 3; ++call) {  // several passes of different lengths
    const int T = 5 + 7 * call;
    std::vector<float> x(size_t(T) * 96), y(size_t(T) * 160);
    for (float& v : x) v = nd(rng);
    for (float& v : y) v = nd(rng);
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < 96; ++j) ref_qk[j] += double(x[t * 96 + j]) * x[t * 96 + j];
      for (int j = 0; j < 160; ++j) ref_down[j] += double(y[t * 160 + j]) * y[t * 160 + j];
    }
    LS_ASSERT_OK(c.add(qk, x.data(), T));
    LS_ASSERT_OK(c.add(d, y.data(), T));
  }
  const uint64_t tokens = 5 + 12 + 19;
  const auto sums = c.snapshot();
  ASSERT_EQ(sums.size(), 3u);
  for (int j = 0; j < 96; ++j) EXPECT_NEAR(sums.at(q.name).sum2[j], ref_qk[j], 1e-9 * ref_qk[j]) << seed;
  EXPECT_EQ(sums.at(k.name).sum2, sums.at(q.name).sum2);
  EXPECT_EQ(sums.at(down.name).count, tokens);

  testing::TempDir dir;
  const std::string path = dir.file("im.gguf");
  LS_ASSERT_OK(c.write(path, {{"calib.txt"}, 3, 64}));
  // llama-imatrix's layout: in_sum2 [n_in, 1] and counts [1, 1], F32, and its keys.
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
  EXPECT_EQ(f.get_string("general.type").value(), "imatrix");
  EXPECT_EQ(f.tensors().size(), 6u);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight.in_sum2")->dims, (std::vector<uint64_t>{160, 1}));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight.counts")->dims, (std::vector<uint64_t>{1, 1}));
  const std::vector<float> in_sum2 = read_f32_tensor(f, "blk.0.ffn_down.weight.in_sum2");
  ASSERT_EQ(in_sum2.size(), 160u);
  for (int j = 0; j < 160; ++j) EXPECT_FLOAT_EQ(in_sum2[j], static_cast<float>(ref_down[j])) << j;
  EXPECT_EQ(read_f32_tensor(f, "blk.0.ffn_down.weight.counts"), std::vector<float>{float(tokens)});
  // Our reader (what quantize --imatrix uses): importances = sums / count.
  LS_ASSERT_OK_AND_ASSIGN(ImportanceMatrix m, read_imatrix_file(path));
  EXPECT_EQ(m.chunk_count, 3u);
  EXPECT_EQ(m.chunk_size, 64u);
  EXPECT_EQ(m.datasets, std::vector<std::string>{"calib.txt"});
  ASSERT_NE(m.find(q.name), nullptr);
  for (int j = 0; j < 96; ++j) EXPECT_NEAR((*m.find(q.name))[j], ref_qk[j] / tokens, 1e-6 * ref_qk[j] / tokens);
}

TEST(ImatrixCollect, BadInputIsRefused) {
  const GgufTensorInfo q = weight("blk.0.attn_q.weight", 32, 32), wide = weight("blk.0.ffn_down.weight", 64, 32);
  const GgufTensorInfo* mixed[] = {&q, &wide};
  std::vector<float> x(64, 1.0f);
  ImatrixCollector c;
  EXPECT_EQ(c.add(mixed, x.data(), 1).code(), StatusCode::kInvalidArgument);  // one input, two row lengths
  const GgufTensorInfo* one[] = {&q};
  LS_EXPECT_OK(c.add(one, x.data(), 2));
  GgufTensorInfo q_again = weight("blk.0.attn_q.weight", 64, 32);
  const GgufTensorInfo* again[] = {&q_again};
  const Status changed = c.add(again, x.data(), 1);
  EXPECT_EQ(changed.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(changed.message().find("rows of 32 before, now 64"), std::string::npos) << changed.message();
  x[3] = INFINITY;
  const Status inf = c.add(one, x.data(), 1);
  EXPECT_EQ(inf.code(), StatusCode::kCorruption);
  EXPECT_NE(inf.message().find("'blk.0.attn_q.weight' column 3"), std::string::npos) << inf.message();

  testing::TempDir dir;
  EXPECT_EQ(ImatrixCollector().write(dir.file("empty.gguf"), {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(check_imatrix_output(dir.path().string()).code(), StatusCode::kInvalidArgument);  // a folder
  EXPECT_EQ(check_imatrix_output(dir.file("no/such/folder/im.gguf")).code(), StatusCode::kIOError);
  LS_EXPECT_OK(check_imatrix_output(dir.file("im.gguf")));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // the probe leaves nothing
}

// The first block's Q/K/V input for `tokens` recomputed from the file in
// float64: rmsnorm(token_embd row) * attn_norm, its squares summed per column.
std::vector<double> first_attention_input_sum2(const GgufFile& f, const LlamaModel& m,
                                               const std::vector<int32_t>& tokens) {
  const uint64_t e = m.hparams.n_embd;
  auto src = FileByteSource::open(f.path());
  EXPECT_TRUE(src.ok());
  std::vector<float> norm(e), row(e);
  EXPECT_TRUE((*src)->read_at(m.blocks[0].attn_norm.offset, norm.data(), e * sizeof(float)).ok());
  const uint64_t row_bytes = m.token_embd.n_bytes / m.hparams.n_vocab;
  std::vector<uint8_t> raw(row_bytes);
  std::vector<double> sum2(e, 0.0);
  for (int32_t t : tokens) {
    EXPECT_TRUE((*src)->read_at(m.token_embd.offset + uint64_t(t) * row_bytes, raw.data(), row_bytes).ok());
    EXPECT_TRUE(math::decode_row(m.token_embd.type, raw.data(), e, row.data()).ok());
    double ms = 0;
    for (float v : row) ms += double(v) * v;
    const double inv = 1.0 / std::sqrt(ms / double(e) + m.hparams.rms_eps);
    for (uint64_t j = 0; j < e; ++j) {
      const double y = row[j] * inv * norm[j];
      sum2[j] += y * y;
    }
  }
  return sum2;
}

// A real pass of the tiny model with the collector as the runner's observer:
// every block matmul's input is summed once per token, and the first block's
// attention input is the normed embedding recomputed above.
TEST(ImatrixCollect, RunnerObserverSeesEveryBlockMatmulInput) {
  const uint64_t seed = testing::fresh_seed();
  testing::TempDir dir;
  const std::string path = dir.file("tiny.gguf");
  LS_ASSERT_OK(write_example_model(path, testing::tiny_llama_spec(GgmlType::F16, seed, 256)));
  auto device = testing::open_host_device(2);
  ASSERT_NE(device, nullptr);
  ImatrixCollector c;
  llama::RunnerOptions ro;
  ro.n_ctx = 64;
  ro.prefill_chunk = 24;  // a chunk of 40 tokens in two passes
  ro.trace = false;
  ro.matmul_inputs = [&c](std::span<const GgufTensorInfo* const> w, const float* x, int n) { return c.add(w, x, n); };
  LS_ASSERT_OK_AND_ASSIGN(auto runner, llama::LlamaRunner::create(*device, path, ro));
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(40);
  std::vector<llama::PassToken> batch;
  for (int i = 0; i < 40; ++i) {
    tokens[i] = static_cast<int32_t>(rng() % 512);
    batch.push_back({tokens[i], i, 0, false});
  }
  LS_ASSERT_OK(runner->decode_tokens(batch, nullptr));

  const auto sums = c.snapshot();
  ASSERT_EQ(sums.size(), 4u * 7u) << "Q, K, V, O, gate, up, down of 4 blocks";
  for (const auto& [name, s] : sums) {
    EXPECT_EQ(s.count, 40u) << name;
    double lo = s.sum2[0], hi = s.sum2[0];
    for (double v : s.sum2) lo = std::min(lo, v), hi = std::max(hi, v);
    EXPECT_GT(lo, 0.0) << name;
    EXPECT_GT(hi, lo * 1.01) << name << ": the columns should differ";
  }
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
  LS_ASSERT_OK_AND_ASSIGN(LlamaModel m, load_llama_model(f));
  const std::vector<double> ref = first_attention_input_sum2(f, m, tokens);
  for (const char* w : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    const std::vector<double>& got = sums.at(w).sum2;
    ASSERT_EQ(got.size(), ref.size());
    for (size_t j = 0; j < ref.size(); ++j) EXPECT_NEAR(got[j], ref[j], 1e-5 * ref[j]) << w << " column " << j;
  }
  EXPECT_EQ(sums.at("blk.1.ffn_down.weight").sum2.size(), 128u);  // n_ff inputs
}

}  // namespace
}  // namespace layerstream

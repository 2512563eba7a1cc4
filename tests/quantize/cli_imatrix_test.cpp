// `layerstream imatrix` end to end on an example model: the file it writes
// reads back with our imatrix reader (one entry per block matmul, a count of
// every token of every chunk, llama-imatrix's keys), steers `quantize
// --imatrix`, and bad input (no text, a text shorter than one chunk, an
// output that cannot be written, a bad --chunk) exits non-zero with a clear
// message before any work, leaving no file behind; nor does Ctrl-C.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "runtime/model/byte_source.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/imatrix.h"
#include "tests/common/cli.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

using ::testing::HasSubstr;
using testing::CliResult;
using testing::run_cli;

// Words of the example tokenizer's vocabulary, in a random order.
void write_text(const std::string& path, int n_words, uint64_t seed) {
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "river", "stone"};
  std::mt19937_64 rng(seed);
  std::ofstream out(path);
  for (int i = 0; i < n_words; ++i) out << words[rng() % std::size(words)] << (i % 17 == 16 ? ".\n" : " ");
}

class CliImatrix : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = testing::fresh_seed();
    model_ = dir_.file("m.gguf");
    CliResult mk = run_cli("example-model " + model_ + " --layers 3 --hidden 256 --ffn 512 --seed " +
                           std::to_string(seed_ % 1000000));
    ASSERT_EQ(mk.exit_code, 0) << mk.err;
    text_ = dir_.file("text.txt");
    write_text(text_, 2000, seed_);
  }
  // Expects the command to fail with `words` on stderr and leave `out` absent.
  void expect_refused(const std::string& args, const std::string& out, const std::string& words, int code = 1) {
    CliResult r = run_cli("imatrix " + model_ + " " + args);
    EXPECT_EQ(r.exit_code, code) << args << "\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(words)) << args;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp")) << args;
  }
  testing::TempDir dir_;
  uint64_t seed_ = 0;
  std::string model_, text_;
};

TEST_F(CliImatrix, WritesWhatOurReaderAndQuantizeRead) {
  const std::string out = dir_.file("im.gguf");
  CliResult r = run_cli("imatrix " + model_ + " -f " + text_ + " -o " + out + " --chunk 64 --chunks 3");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("chunk 3/3"));
  EXPECT_THAT(r.err, HasSubstr("ETA"));
  EXPECT_THAT(r.out, HasSubstr("21 matrices, 3 chunks of 64 tokens"));

  auto m = read_imatrix_file(out);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->chunk_count, 3u);
  EXPECT_EQ(m->chunk_size, 64u);
  EXPECT_EQ(m->datasets, std::vector<std::string>{text_});
  EXPECT_EQ(m->entries.size(), 3u * 7u);
  for (const auto& [name, imp] : m->entries) {
    EXPECT_EQ(imp.size(), name.find("ffn_down") != std::string::npos ? 512u : 256u) << name;
    EXPECT_GT(*std::min_element(imp.begin(), imp.end()), 0.0f) << name;
    EXPECT_NE(*std::min_element(imp.begin(), imp.end()), *std::max_element(imp.begin(), imp.end())) << name;
  }
  // Q, K and V share their input.
  EXPECT_EQ(*m->find("blk.1.attn_q.weight"), *m->find("blk.1.attn_v.weight"));
  // Every token of every chunk is counted, in llama-imatrix's F32 counts.
  auto f = read_gguf_file(out);
  ASSERT_TRUE(f.ok());
  const GgufTensorInfo* counts = f->find_tensor("blk.2.ffn_down.weight.counts");
  ASSERT_NE(counts, nullptr);
  float count = 0;
  auto src = FileByteSource::open(out);
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE((*src)->read_at(counts->offset, &count, sizeof count).ok());
  EXPECT_EQ(count, 3.0f * 64.0f);

  const std::string q = dir_.file("q.gguf");
  CliResult qr = run_cli("quantize " + model_ + " " + q + " --type q4_k_m --imatrix " + out);
  ASSERT_EQ(qr.exit_code, 0) << qr.out << qr.err;
  EXPECT_THAT(qr.out, HasSubstr("21 with the importance matrix"));
}

TEST_F(CliImatrix, BadInputIsAClearErrorBeforeAnyWork) {
  const std::string out = dir_.file("im.gguf");
  expect_refused("-f " + dir_.file("missing.txt") + " -o " + out, out, "cannot open the text");
  const std::string short_text = dir_.file("short.txt");
  write_text(short_text, 20, seed_);
  expect_refused("-f " + short_text + " -o " + out + " --chunk 512", out, "fewer than one chunk of 512");
  const std::string missing_dir = dir_.file("no/such/folder/im.gguf");
  expect_refused("-f " + text_ + " -o " + missing_dir, missing_dir, "cannot write the importance matrix");
  CliResult folder = run_cli("imatrix " + model_ + " -f " + text_ + " -o " + dir_.path().string());
  EXPECT_EQ(folder.exit_code, 1);
  EXPECT_THAT(folder.err, HasSubstr("is a folder"));
  expect_refused("-f " + text_ + " -o " + out + " --chunk 0", out, "--chunk must be >= 1", 2);
  expect_refused("-f " + text_ + " -o " + out + " --chunk 64 --ctx 32", out, "cannot hold a chunk of 64", 2);
  expect_refused("-f " + text_ + " -o " + out + " --vram junk", out, "--vram", 2);
}

TEST_F(CliImatrix, SigintWritesNothing) {
  const std::string big = dir_.file("big.gguf"), long_text = dir_.file("long.txt"), out = dir_.file("im.gguf");
  ASSERT_EQ(run_cli("example-model " + big + " --layers 8 --hidden 512 --ffn 1536 --dtype f32").exit_code, 0);
  write_text(long_text, 20000, seed_);
  // Start it, wait for its first chunk, then interrupt.
  const std::string err = dir_.file("err.txt");
  const std::string script = std::string("-c '") + LAYERSTREAM_CLI_PATH + " imatrix " + big + " -f " + long_text +
                             " -o " + out + " --chunk 256 --host-threads 1 2>" + err +
                             " & pid=$!; i=0; while ! grep -q \"chunk 1/\" " + err +
                             " && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; kill -INT $pid; wait $pid'";
  CliResult r = testing::run_command("/bin/sh", script);
  EXPECT_NE(r.exit_code, 0) << r.out;
  std::ifstream in(err);
  const std::string msg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(msg, HasSubstr("interrupted: " + out + " was not written"));
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

}  // namespace
}  // namespace layerstream

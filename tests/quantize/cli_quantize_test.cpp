// `layerstream quantize` end to end on example models: the output opens with
// the planned types and its logits stay close to the original's (closer the
// more bits); an importance matrix is read and used; every bad input (unknown
// type, a type that cannot hold the rows, requantising without the flag, IN
// == OUT, a read-only folder, a write that fails midway, SIGINT) exits
// non-zero with a clear message and leaves no file behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <vector>

#include "runtime/model/gguf_file.h"
#include "runtime/model/gguf_writer.h"
#include "tests/common/cli.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::CliResult;
using testing::run_cli;
using testing::run_command;
using testing::TempDir;

constexpr int kVocab = 512;
const char* kModelShape = "--layers 4 --hidden 256 --ffn 768 --heads 4 --kv-heads 2 --vocab 512";

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The logits row `layerstream run` writes for the last prompt position.
std::vector<float> last_logits(const std::string& model, const TempDir& dir) {
  const std::string npy = dir.file("l.npy");
  CliResult r = run_cli("run " + model + " --tokens 1,17,42,99,7,300,12,5 -n 1 --ignore-eog --temp 0 --backend host "
                        "--exact --ctx 64 --logits " + npy);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<uint8_t> b = testing::read_file(npy);
  if (b.size() < 10) return {};
  const size_t hlen = b[8] | (b[9] << 8);
  std::vector<float> l(kVocab);
  EXPECT_EQ(b.size(), 10 + hlen + kVocab * sizeof(float));
  std::memcpy(l.data(), b.data() + 10 + hlen, kVocab * sizeof(float));
  return l;
}

// |a - b| / |b - mean(b)|: the error relative to the spread of the logits.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double mean = 0, num = 0, den = 0;
  for (float v : b) mean += v / b.size();
  for (size_t i = 0; i < b.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += (b[i] - mean) * (b[i] - mean);
  return std::sqrt(num / den);
}

class CliQuantize : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.file("f16.gguf");
    CliResult mk = run_cli("example-model " + model_ + " " + kModelShape + " --dtype f16 --seed " +
                           std::to_string(testing::fresh_seed() % 1000000));
    ASSERT_EQ(mk.exit_code, 0) << mk.err;
  }
  // Runs quantize into a fresh folder; expects failure with `words` on
  // stderr and nothing left in that folder.
  void expect_refused(const std::string& args, const std::string& words, int code = 1) {
    TempDir out;
    CliResult r = run_cli("quantize " + model_ + " " + out.file("q.gguf") + " " + args);
    EXPECT_EQ(r.exit_code, code) << args << "\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(words)) << args;
    EXPECT_TRUE(files_in(out.path()).empty()) << args;
  }
  TempDir dir_;
  std::string model_;
};

TEST_F(CliQuantize, MixesOpenWithTheirTypesAndKeepTheLogits) {
  const std::vector<float> ref = last_logits(model_, dir_);
  ASSERT_EQ(ref.size(), static_cast<size_t>(kVocab));
  std::map<std::string, double> err;
  for (const std::string type : {"q8_0", "q6_k", "q4_k_m", "iq4_xs", "q3_k_m", "q2_k"}) {
    const std::string out = dir_.file(type + ".gguf");
    CliResult r = run_cli("quantize " + model_ + " " + out + " --type " + type + " --threads 2");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("wrote " + out));
    auto f = read_gguf_file(out);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(*f->get_u32("general.quantization_version"), 2u);
    if (type == "q4_k_m") {
      EXPECT_EQ(*f->get_u32("general.file_type"), 15u);
      // use_more_bits(i, 4): layers 2 and 3
      EXPECT_EQ(f->find_tensor("blk.0.attn_v.weight")->type, GgmlType::Q4_K);
      EXPECT_EQ(f->find_tensor("blk.2.attn_v.weight")->type, GgmlType::Q6_K);
      EXPECT_EQ(f->find_tensor("blk.3.ffn_down.weight")->type, GgmlType::Q6_K);
      EXPECT_EQ(f->find_tensor("blk.1.attn_q.weight")->type, GgmlType::Q4_K);
      EXPECT_EQ(f->find_tensor("output.weight")->type, GgmlType::Q6_K);
      EXPECT_EQ(f->find_tensor("blk.1.attn_norm.weight")->type, GgmlType::F32);
    }
    const std::vector<float> got = last_logits(out, dir_);
    ASSERT_EQ(got.size(), ref.size());
    err[type] = relative_error(got, ref);
  }
  for (const auto& [t, e] : err) std::cout << t << ": relative logit error " << e << "\n";
  EXPECT_LT(err["q8_0"], 0.02);
  EXPECT_LT(err["q6_k"], 0.05);
  EXPECT_LT(err["q4_k_m"], 0.15);
  EXPECT_LT(err["q8_0"], err["q4_k_m"]);
  EXPECT_LT(err["q4_k_m"], err["q2_k"]);
  EXPECT_LT(err["q2_k"], 0.6);
}

// An importance matrix GGUF as llama-imatrix writes it, for every matrix of
// the model: sums of squares `scale`-times larger on the first 16 columns.
void write_imatrix(const std::string& path, const GgufFile& model, uint64_t drop_cols = 0) {
  GgufWriter w;
  ASSERT_TRUE(w.add("imatrix.datasets", GgufValue::string_array({"test.txt"})).ok());
  ASSERT_TRUE(w.add("imatrix.chunk_count", GgufValue::u32(4)).ok());
  ASSERT_TRUE(w.add("imatrix.chunk_size", GgufValue::u32(512)).ok());
  std::vector<const GgufTensorInfo*> mats;
  for (const auto& t : model.tensors()) {
    if (t.dims.size() < 2 || t.name == "token_embd.weight") continue;
    mats.push_back(&t);
    ASSERT_TRUE(w.add_tensor(t.name + ".in_sum2", {t.dims[0] - drop_cols, 1}, GgmlType::F32).ok());
    ASSERT_TRUE(w.add_tensor(t.name + ".counts", {1, 1}, GgmlType::F32).ok());
  }
  Status s = w.write(path, [&](size_t i, const GgufTensorInfo& info, TensorSink& sink) {
    std::vector<float> v(info.n_elements());
    if (i % 2 == 1) {
      v[0] = 2048;  // tokens counted
    } else {
      for (size_t j = 0; j < v.size(); ++j) v[j] = 2048.0f * (j < 16 ? 50.0f : 1.0f) * (1 + 0.01f * (j % 7));
    }
    return sink.write(v.data(), v.size() * sizeof(float));
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
}

TEST_F(CliQuantize, ImportanceMatrixIsReadAndRecorded) {
  auto f = read_gguf_file(model_);
  ASSERT_TRUE(f.ok());
  const std::string im = dir_.file("imatrix.gguf");
  write_imatrix(im, *f);
  const std::string out = dir_.file("q.gguf");
  CliResult r = run_cli("quantize " + model_ + " " + out + " --type q4_k_m --imatrix " + im);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("with the importance matrix"));
  auto q = read_gguf_file(out);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q->get_string("quantize.imatrix.file"), im);
  EXPECT_EQ(*q->get_string("quantize.imatrix.dataset"), "test.txt");
  EXPECT_EQ(*q->get_int("quantize.imatrix.chunks_count"), 4);
  // The same without the matrix differs (the weights steered the search).
  const std::string plain = dir_.file("plain.gguf");
  ASSERT_EQ(run_cli("quantize " + model_ + " " + plain + " --type q4_k_m").exit_code, 0);
  EXPECT_NE(testing::read_file(out), testing::read_file(plain));

  const std::string bad = dir_.file("bad.gguf");
  write_imatrix(bad, *f, /*drop_cols=*/32);
  expect_refused("--type q4_k_m --imatrix " + bad, "needs");
  expect_refused("--type q4_k_m --imatrix " + model_, "not an importance matrix");
}

TEST_F(CliQuantize, BadInputIsAClearError) {
  expect_refused("--type q9_k", "unknown type 'q9_k'", 2);
  expect_refused("--type q4_k_m --align 100", "power of two", 2);
  // ffn_down rows of 768 are 3 blocks of 256, but a 704-wide model's are not.
  TempDir odd;
  const std::string odd_model = odd.file("odd.gguf");
  ASSERT_EQ(run_cli("example-model " + odd_model + " --layers 2 --hidden 256 --ffn 704 --heads 4 --kv-heads 2").exit_code,
            0);
  {
    TempDir out;
    CliResult r = run_cli("quantize " + odd_model + " " + out.file("q.gguf") + " --type q4_k");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, HasSubstr("Q4_K cannot hold rows of 704 elements"));
    EXPECT_TRUE(files_in(out.path()).empty());
    CliResult m = run_cli("quantize " + odd_model + " " + out.file("m.gguf") + " --type q4_k_m");
    EXPECT_EQ(m.exit_code, 0) << m.err;
    EXPECT_THAT(m.out, HasSubstr("fallback"));
  }
  // Requantising needs the flag.
  const std::string q8 = dir_.file("q8.gguf");
  ASSERT_EQ(run_cli("quantize " + model_ + " " + q8 + " --type q8_0").exit_code, 0);
  {
    TempDir out;
    CliResult r = run_cli("quantize " + q8 + " " + out.file("q.gguf") + " --type q4_k_m");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, HasSubstr("already quantised (Q8_0)"));
    EXPECT_THAT(r.err, HasSubstr("--allow-requantize"));
    EXPECT_TRUE(files_in(out.path()).empty());
    EXPECT_EQ(run_cli("quantize " + q8 + " " + out.file("q.gguf") + " --type q4_k_m --allow-requantize").exit_code, 0);
  }
  // IN == OUT, by the same path and through a hard link.
  const auto before = testing::read_file(model_);
  CliResult same = run_cli("quantize " + model_ + " " + model_ + " --type q8_0");
  EXPECT_EQ(same.exit_code, 1);
  EXPECT_THAT(same.err, HasSubstr("is the input file"));
  const std::string link = dir_.file("link.gguf");
  fs::create_hard_link(model_, link);
  EXPECT_EQ(run_cli("quantize " + model_ + " " + link + " --type q8_0").exit_code, 1);
  EXPECT_EQ(testing::read_file(model_), before);
}

// A small tmpfs mounted for the test (root only; skipped otherwise), unmounted after.
class TmpfsMount {
 public:
  explicit TmpfsMount(const std::string& options) {
    if (::geteuid() != 0) return;
    const std::string cmd = "mount -t tmpfs -o " + options + " tmpfs " + dir_.path().string() + " 2>/dev/null";
    mounted_ = std::system(cmd.c_str()) == 0;
  }
  ~TmpfsMount() {
    if (mounted_) std::system(("umount " + dir_.path().string()).c_str());
  }
  bool mounted() const { return mounted_; }
  std::string file(const std::string& name) const { return dir_.file(name); }
  const fs::path& path() const { return dir_.path(); }

 private:
  TempDir dir_;
  bool mounted_ = false;
};

// A NaN in a weight is reported with the tensor and row, not encoded.
TEST_F(CliQuantize, NonFiniteInputIsRefused) {
  auto f = read_gguf_file(model_);
  ASSERT_TRUE(f.ok());
  const GgufTensorInfo* t = f->find_tensor("blk.1.ffn_up.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, GgmlType::F16);
  {
    std::fstream io(model_, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(t->offset + 2 * (3 * t->dims[0] + 5)));  // row 3, element 5
    const uint16_t nan = 0x7E00;
    io.write(reinterpret_cast<const char*>(&nan), 2);
  }
  expect_refused("--type q4_k_m", "tensor 'blk.1.ffn_up.weight' row 3 element 5 holds nan");
}

TEST_F(CliQuantize, MissingInput) {
  TempDir out;
  CliResult r = run_cli("quantize " + dir_.file("nope.gguf") + " " + out.file("q.gguf") + " --type q8_0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot open"));
  EXPECT_THAT(r.err, HasSubstr("nope.gguf"));
  EXPECT_TRUE(files_in(out.path()).empty());
}

TEST_F(CliQuantize, ReadOnlyOutputFolder) {
  TmpfsMount ro("ro,size=16m");
  if (!ro.mounted()) GTEST_SKIP() << "needs root to mount a read-only tmpfs";
  CliResult r = run_cli("quantize " + model_ + " " + ro.file("q.gguf") + " --type q8_0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot create"));
  EXPECT_THAT(r.err, HasSubstr("Read-only file system"));
  EXPECT_TRUE(files_in(ro.path()).empty());
}

TEST_F(CliQuantize, FullOutputDiskIsRefusedBeforeWriting) {
  TmpfsMount small("size=1m");  // the Q8_0 output is about 3.5 MiB
  if (!small.mounted()) GTEST_SKIP() << "needs root to mount a small tmpfs";
  CliResult r = run_cli("quantize " + model_ + " " + small.file("q.gguf") + " --type q8_0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the quantized model needs"));
  EXPECT_THAT(r.err, HasSubstr("free"));
  EXPECT_TRUE(files_in(small.path()).empty());
}

// A write that fails midway (the file-size limit stands in for a full disk):
// a clear error and neither OUT nor OUT.tmp left.
TEST_F(CliQuantize, WriteFailureMidwayLeavesNothing) {
  TempDir out;
  const std::string q = out.file("q.gguf");
  CliResult r = run_command("/bin/sh", std::string("-c 'ulimit -f 512; exec ") + LAYERSTREAM_CLI_PATH + " quantize " +
                                           model_ + " " + q + " --type q8_0'");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("File too large"));
  EXPECT_TRUE(files_in(out.path()).empty());
}

// SIGINT while quantising: exit non-zero with "interrupted", nothing left.
TEST_F(CliQuantize, SigintLeavesNoFile) {
  TempDir work;
  const std::string big = work.file("big.gguf");
  ASSERT_EQ(run_cli("example-model " + big + " --size 96MiB --dtype f32 --threads 2").exit_code, 0);
  TempDir out;
  const std::string q = out.file("q.gguf");
  // Start it, wait for the temporary file to appear, then interrupt.
  const std::string script = std::string("-c '") + LAYERSTREAM_CLI_PATH + " quantize " + big + " " + q +
                             " --type q6_k --threads 1 & pid=$!; i=0; while [ ! -s " + q +
                             ".tmp ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; kill -INT $pid; wait $pid'";
  CliResult r = run_command("/bin/sh", script);
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("interrupted"));
  EXPECT_TRUE(files_in(out.path()).empty());
}

}  // namespace
}  // namespace layerstream

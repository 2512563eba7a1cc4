// Writer -> reader round trips: every metadata value type, every supported
// tensor type's block layout (decoded against a float64 reference written
// here from the GGUF spec), the typed getters and the writer's failure modes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "kernels/math/convert_row.h"
#include "runtime/core/status_macros.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/gguf_writer.h"
#include "tests/common/gguf_layout_eq.h"
#include "tests/common/testing.h"

namespace layerstream {
namespace {

using testing::TempDir;

// ---- float64 reference decoders, from the GGUF / ggml spec -------------------
double ref_f16(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -v : v;
}
double ref_bf16(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

std::vector<double> ref_decode(GgmlType t, const std::vector<uint8_t>& b, size_t n) {
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
      case GgmlType::F32: { float f; std::memcpy(&f, &b[4 * i], 4); out[i] = f; break; }
      case GgmlType::F16: out[i] = ref_f16(le16(&b[2 * i])); break;
      case GgmlType::BF16: out[i] = ref_bf16(le16(&b[2 * i])); break;
      case GgmlType::Q8_0: {  // {f16 d; int8 qs[32]}
        const uint8_t* blk = &b[(i / 32) * 34];
        out[i] = ref_f16(le16(blk)) * static_cast<int8_t>(blk[2 + i % 32]);
        break;
      }
      case GgmlType::Q4_0: {  // {f16 d; uint8 qs[16]}: j < 16 low nibble of qs[j], else high nibble of qs[j-16]
        const uint8_t* blk = &b[(i / 32) * 18];
        const size_t j = i % 32;
        const int q = j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4);
        out[i] = ref_f16(le16(blk)) * (q - 8);
        break;
      }
      case GgmlType::Q4_1: {  // {f16 d; f16 m; uint8 qs[16]}
        const uint8_t* blk = &b[(i / 32) * 20];
        const size_t j = i % 32;
        const int q = j < 16 ? (blk[4 + j] & 15) : (blk[4 + j - 16] >> 4);
        out[i] = ref_f16(le16(blk)) * q + ref_f16(le16(blk + 2));
        break;
      }
      default: ADD_FAILURE() << "no reference for type"; break;
    }
  }
  return out;
}

// A finite random f16 (exponent below 31) with magnitude < 2.
uint16_t random_f16(std::mt19937_64& rng) {
  const uint16_t exp = static_cast<uint16_t>(rng() % 16);  // 2^-15 .. 2^0
  return static_cast<uint16_t>(((rng() & 1) << 15) | (exp << 10) | (rng() & 0x3FF));
}

// Random but valid bytes of `n` elements of `t`.
std::vector<uint8_t> random_tensor_bytes(GgmlType t, size_t n, std::mt19937_64& rng) {
  const GgmlTypeTraits tr = ggml_type_traits(t);
  std::vector<uint8_t> b(n / tr.block_elems * tr.block_bytes);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  auto put16 = [&](size_t at, uint16_t v) { b[at] = v & 0xFF; b[at + 1] = v >> 8; };
  switch (t) {
    case GgmlType::F32: {
      std::normal_distribution<float> d(0, 3);
      for (size_t i = 0; i < n; ++i) { float f = d(rng); std::memcpy(&b[4 * i], &f, 4); }
      break;
    }
    case GgmlType::F16: for (size_t i = 0; i < n; ++i) put16(2 * i, random_f16(rng)); break;
    case GgmlType::BF16: for (size_t i = 0; i < n; ++i) put16(2 * i, static_cast<uint16_t>((rng() & 0x80FF) | 0x3C00)); break;
    case GgmlType::Q8_0: for (size_t k = 0; k < n / 32; ++k) put16(k * 34, random_f16(rng)); break;
    case GgmlType::Q4_0: for (size_t k = 0; k < n / 32; ++k) put16(k * 18, random_f16(rng)); break;
    case GgmlType::Q4_1:
      for (size_t k = 0; k < n / 32; ++k) { put16(k * 20, random_f16(rng)); put16(k * 20 + 2, random_f16(rng)); }
      break;
    default: break;
  }
  return b;
}

class VectorSinkFill {
 public:
  explicit VectorSinkFill(std::vector<std::vector<uint8_t>> data) : data_(std::move(data)) {}
  Status operator()(size_t i, const GgufTensorInfo& t, TensorSink& sink) const {
    // Written in uneven pieces to exercise the sink.
    const auto& d = data_[i];
    size_t at = 0, piece = 1;
    while (at < d.size()) {
      size_t k = std::min(piece, d.size() - at);
      LS_RETURN_IF_ERROR(sink.write(d.data() + at, k));
      at += k;
      piece = piece * 3 + 1;
    }
    return Status::OK();
  }
  const std::vector<std::vector<uint8_t>>& data() const { return data_; }

 private:
  std::vector<std::vector<uint8_t>> data_;
};

std::vector<uint8_t> read_range(const std::string& path, uint64_t off, uint64_t n) {
  auto src = FileByteSource::open(path);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  std::vector<uint8_t> out(n);
  if (src.ok()) EXPECT_TRUE((*src)->read_at(off, out.data(), n).ok());
  return out;
}

const GgmlType kSupported[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16,
                               GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1};

TEST(GgufRoundTrip, MetadataTensorInfosAndBytesAreIdentical) {
  std::mt19937_64 rng(testing::fresh_seed());
  TempDir dir;
  for (uint32_t alignment : {32u, 4096u}) {
    GgufWriter w(alignment);
    LS_ASSERT_OK(w.add("u8", GgufValue::u8(200)));
    LS_ASSERT_OK(w.add("i8", GgufValue::i8(-100)));
    LS_ASSERT_OK(w.add("u16", GgufValue::u16(60000)));
    LS_ASSERT_OK(w.add("i16", GgufValue::i16(-30000)));
    LS_ASSERT_OK(w.add("u32", GgufValue::u32(static_cast<uint32_t>(rng()))));
    LS_ASSERT_OK(w.add("i32", GgufValue::i32(-static_cast<int32_t>(rng() % 1000000))));
    LS_ASSERT_OK(w.add("u64", GgufValue::u64(rng())));
    LS_ASSERT_OK(w.add("i64", GgufValue::i64(-static_cast<int64_t>(rng() >> 2))));
    LS_ASSERT_OK(w.add("f32", GgufValue::f32(std::uniform_real_distribution<float>(-5, 5)(rng))));
    LS_ASSERT_OK(w.add("f64", GgufValue::f64(std::uniform_real_distribution<double>(-5, 5)(rng))));
    LS_ASSERT_OK(w.add("bool", GgufValue::boolean(true)));
    LS_ASSERT_OK(w.add("str", GgufValue::string("h\xc3\xa9llo \xe2\x96\x81world")));
    LS_ASSERT_OK(w.add("empty_str", GgufValue::string("")));
    std::vector<std::string> strs = {"", "a", std::string(300, 'z'), "\xe2\x96\x81the"};
    for (int i = 0; i < 50; ++i) strs.push_back(std::to_string(rng()));
    LS_ASSERT_OK(w.add("strs", GgufValue::string_array(strs)));
    std::vector<float> fs(100);
    for (auto& f : fs) f = std::uniform_real_distribution<float>(-1, 1)(rng);
    LS_ASSERT_OK(w.add("f32s", GgufValue::f32_array(fs)));
    LS_ASSERT_OK(w.add("i32s", GgufValue::i32_array({-1, 0, 7, static_cast<int32_t>(rng())})));
    LS_ASSERT_OK(w.add("empty_arr", GgufValue::numeric_array(GgufType::kUint64, {})));
    std::vector<std::vector<uint8_t>> data;
    int k = 0;
    for (GgmlType t : kSupported) {
      const uint64_t ne0 = 32 * (1 + rng() % 4), ne1 = 1 + rng() % 5;
      LS_ASSERT_OK(w.add_tensor("t" + std::to_string(k++), {ne0, ne1}, t));
      data.push_back(random_tensor_bytes(t, ne0 * ne1, rng));
    }
    LS_ASSERT_OK(w.add_tensor("vec", {64}, GgmlType::F32));
    data.push_back(random_tensor_bytes(GgmlType::F32, 64, rng));
    const std::string path = dir.file("rt" + std::to_string(alignment) + ".gguf");
    VectorSinkFill fill(data);
    LS_ASSERT_OK(w.write(path, std::ref(fill)));
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    EXPECT_EQ(std::filesystem::file_size(path), w.file_size());

    LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(path));
    testing::expect_file_matches_layout(f, w, alignment);
    ASSERT_EQ(f.tensors().size(), data.size());
    for (size_t i = 0; i < f.tensors().size(); ++i)
      EXPECT_EQ(read_range(path, f.tensors()[i].offset, f.tensors()[i].n_bytes), data[i]) << f.tensors()[i].name;
    EXPECT_EQ(f.get_array("strs", GgufType::kString).value()->array_strings(), strs);
  }
}

TEST(GgufRoundTrip, TypedGettersConvertAndReportErrors) {
  std::mt19937_64 rng(testing::fresh_seed());
  const uint32_t x = static_cast<uint32_t>(rng() % 200);
  GgufWriter w;
  LS_ASSERT_OK(w.add("small", GgufValue::u8(static_cast<uint8_t>(x))));
  LS_ASSERT_OK(w.add("neg", GgufValue::i32(-static_cast<int32_t>(x) - 1)));
  LS_ASSERT_OK(w.add("big", GgufValue::u64(uint64_t{1} << 40)));
  LS_ASSERT_OK(w.add("name", GgufValue::string("abc")));
  LS_ASSERT_OK(w.add("flt", GgufValue::f32(0.5f)));
  LS_ASSERT_OK(w.add("toks", GgufValue::string_array({"a", "b"})));
  TempDir dir;
  LS_ASSERT_OK(w.write(dir.file("g.gguf"), [](size_t, const GgufTensorInfo&, TensorSink&) { return Status::OK(); }));
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(dir.file("g.gguf")));
  EXPECT_EQ(f.get_u32("small").value(), x);
  EXPECT_EQ(f.get_int("neg").value(), -static_cast<int64_t>(x) - 1);
  EXPECT_EQ(f.get_uint("big").value(), uint64_t{1} << 40);
  EXPECT_EQ(f.get_float("flt").value(), 0.5);
  EXPECT_EQ(f.get_string("name").value(), "abc");
  EXPECT_EQ(f.get_u32_or("absent", 7).value(), 7u);

  auto missing = f.get_u32("absent");
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_NE(missing.status().message().find("'absent' is missing"), std::string::npos);
  auto wrong = f.get_string("small");
  EXPECT_TRUE(wrong.status().IsCorruption());
  EXPECT_NE(wrong.status().message().find("has type UINT8; expected STRING"), std::string::npos) << wrong.status().message();
  EXPECT_TRUE(f.get_uint("neg").status().IsCorruption());
  EXPECT_NE(f.get_u32("big").status().message().find("exceeds the limit 4294967295"), std::string::npos);
  EXPECT_TRUE(f.get_float("name").status().IsCorruption());
  EXPECT_TRUE(f.get_u32_or("name", 1).status().IsCorruption());  // present with a wrong type still fails
  auto arr = f.get_array("toks", GgufType::kFloat32);
  EXPECT_NE(arr.status().message().find("ARRAY of STRING; expected ARRAY of FLOAT32"), std::string::npos);
}

class TypeLayoutTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(TypeLayoutTest, DecodesExactlyAsTheSpecDefines) {
  const GgmlType t = GetParam();
  std::mt19937_64 rng(testing::fresh_seed());
  const size_t ne0 = 32 * (2 + rng() % 6), ne1 = 3;
  const auto bytes = random_tensor_bytes(t, ne0 * ne1, rng);
  GgufWriter w;
  LS_ASSERT_OK(w.add_tensor("x", {ne0, ne1}, t));
  TempDir dir;
  VectorSinkFill fill({bytes});
  LS_ASSERT_OK(w.write(dir.file("x.gguf"), std::ref(fill)));
  LS_ASSERT_OK_AND_ASSIGN(GgufFile f, read_gguf_file(dir.file("x.gguf")));
  const GgufTensorInfo& info = f.tensors().at(0);
  EXPECT_EQ(info.n_bytes, bytes.size());
  const auto stored = read_range(dir.file("x.gguf"), info.offset, info.n_bytes);
  ASSERT_EQ(stored, bytes);
  std::vector<float> got(ne0 * ne1);
  LS_ASSERT_OK(math::decode_row(t, stored.data(), got.size(), got.data()));
  const auto want = ref_decode(t, stored, got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // Each value is one f16/bf16/f32 scale times a small integer (plus an f16
    // minimum): exact in float, so the float decode equals the rounded reference.
    ASSERT_EQ(got[i], static_cast<float>(want[i])) << ggml_type_name(static_cast<uint32_t>(t)) << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllSupported, TypeLayoutTest, ::testing::ValuesIn(kSupported),
                         [](const auto& info) { return std::string(ggml_type_traits(info.param).name); });

TEST(GgufWriter, RejectsBadDeclarations) {
  GgufWriter w;
  LS_ASSERT_OK(w.add("k", GgufValue::u32(1)));
  EXPECT_TRUE(w.add("k", GgufValue::u32(2)).IsInvalidArgument());
  EXPECT_TRUE(w.add("", GgufValue::u32(2)).IsInvalidArgument());
  Status q4k = w.add_tensor("q", {256, 4}, GgmlType::IQ2_XXS);
  EXPECT_TRUE(q4k.IsUnsupported());
  EXPECT_NE(q4k.message().find("unsupported tensor type IQ2_XXS (id 16)"), std::string::npos) << q4k.message();
  EXPECT_TRUE(w.add_tensor("q", {33}, GgmlType::Q8_0).IsInvalidArgument());
  EXPECT_TRUE(w.add_tensor(std::string(64, 'n'), {32}, GgmlType::F32).IsInvalidArgument());
  EXPECT_TRUE(w.add_tensor("z", {32, 0}, GgmlType::F32).IsInvalidArgument());
  LS_EXPECT_OK(w.add_tensor("ok", {32}, GgmlType::F32));
  EXPECT_TRUE(w.add_tensor("ok", {32}, GgmlType::F32).IsInvalidArgument());
}

TEST(GgufWriter, FailureOrCancellationLeavesNoFile) {
  TempDir dir;
  GgufWriter w;
  LS_ASSERT_OK(w.add_tensor("a", {64}, GgmlType::F32));
  LS_ASSERT_OK(w.add_tensor("b", {64}, GgmlType::F32));
  const std::string path = dir.file("m.gguf");
  // A fill that writes too little.
  Status s = w.write(path, [](size_t, const GgufTensorInfo&, TensorSink& sink) {
    float x[8] = {};
    return sink.write(x, sizeof(x));
  });
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // A fill that fails on the second tensor.
  s = w.write(path, [](size_t i, const GgufTensorInfo& t, TensorSink& sink) -> Status {
    if (i == 1) return Status::IOError("disk on fire");
    std::vector<uint8_t> z(t.n_bytes);
    return sink.write(z.data(), z.size());
  });
  EXPECT_TRUE(s.IsIOError());
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // Cancelled after the first tensor (as SIGINT does).
  std::atomic<bool> cancel{false};
  GgufWriter::WriteOptions opt;
  opt.cancel = &cancel;
  s = w.write(path, [&](size_t, const GgufTensorInfo& t, TensorSink& sink) {
    cancel = true;
    std::vector<uint8_t> z(t.n_bytes);
    return sink.write(z.data(), z.size());
  }, opt);
  EXPECT_TRUE(s.IsCancelled()) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(ByteSource, MissingFileIsIOErrorNamingThePath) {
  TempDir dir;
  auto r = read_gguf_file(dir.file("nope.gguf"));
  EXPECT_TRUE(r.status().IsIOError());
  EXPECT_NE(r.status().message().find("nope.gguf"), std::string::npos);
}

TEST(ByteSource, BufferedReaderMatchesTheSourceForAnyReadSizes) {
  std::mt19937_64 rng(testing::fresh_seed());
  auto bytes = testing::random_bytes(3 * BufferedReader::kBufferBytes + 123, rng);
  MemoryByteSource src(bytes);
  BufferedReader r(src);
  std::vector<uint8_t> got;
  while (r.remaining() > 0) {
    size_t n = std::min<uint64_t>(r.remaining(), (rng() % 4 == 0) ? rng() % (2 * BufferedReader::kBufferBytes) : rng() % 100);
    std::vector<uint8_t> chunk(n);
    LS_ASSERT_OK(r.read(chunk.data(), n, "chunk"));
    got.insert(got.end(), chunk.begin(), chunk.end());
  }
  EXPECT_EQ(got, bytes);
  uint8_t x;
  Status s = r.read(&x, 1, "one more byte");
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("truncated"), std::string::npos);
}

}  // namespace
}  // namespace layerstream

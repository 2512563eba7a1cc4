#include "runtime/model/quantize.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "kernels/math/convert_row.h"
#include "runtime/core/log.h"
#include "runtime/core/status_macros.h"
#include "runtime/model/byte_source.h"
#include "runtime/model/disk_space.h"
#include "runtime/model/gguf_writer.h"

namespace layerstream {
namespace {

// Elements one worker encodes per step: with the input, float and output
// buffers of two batches in flight, about 24 MiB per thread.
constexpr uint64_t kChunkElems = uint64_t{1} << 19;
constexpr size_t kCopyBytes = size_t{16} << 20;
constexpr uint32_t kQuantizationVersion = 2;  // general.quantization_version of ggml's current block layouts

Status check_distinct_files(const std::string& in, const std::string& out) {
  struct stat si {}, so {};
  if (::stat(in.c_str(), &si) != 0) return Status::FromErrno("cannot open " + in, errno);
  if (::stat(out.c_str(), &so) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
    return Status::InvalidArgument(fmt::format("the output {} is the input file {}: choose another output path", out, in));
  }
  return Status::OK();
}

bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// Checks each converted tensor: its input can be decoded, is not already
// quantised (unless allowed), and the importance matrix fits it.
Status check_conversions(const GgufFile& f, const std::vector<TensorPlan>& plan, const QuantizeOptions& o) {
  for (size_t i = 0; i < plan.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    if (!plan[i].convert) continue;
    const GgmlTypeTraits from = ggml_type_traits(t.type);
    if (!from.supported) {
      return Status::Unsupported(fmt::format("tensor '{}' is {}, which layerstream cannot decode", t.name, from.name));
    }
    if (!is_float_type(t.type) && !o.allow_requantize) {
      return Status::InvalidArgument(fmt::format(
          "tensor '{}' is already quantised ({}); requantising loses quality: start from an F16/BF16/F32 file, "
          "or pass --allow-requantize",
          t.name, from.name));
    }
    const std::vector<float>* im = o.imatrix ? o.imatrix->find(t.name) : nullptr;
    const uint64_t n_mat = t.dims.size() >= 3 ? t.dims[2] : 1;
    if (im && im->size() != t.dims[0] * n_mat) {
      return Status::InvalidArgument(fmt::format("importance matrix entry '{}' has {} values; the tensor {} needs {}",
                                                 t.name, im->size(), t.shape_string(), t.dims[0] * n_mat));
    }
  }
  return Status::OK();
}

Result<GgufWriter> output_layout(const GgufFile& f, const std::vector<TensorPlan>& plan, const QuantizeOptions& o) {
  GgufWriter w(o.alignment);
  auto override_value = [&](const std::string& key) -> std::optional<GgufValue> {
    if (key == "general.file_type") return GgufValue::u32(o.target.file_type);
    if (key == "general.quantization_version") return GgufValue::u32(kQuantizationVersion);
    return std::nullopt;
  };
  for (const auto& kv : f.metadata()) {
    if (kv.key == "general.alignment" || kv.key.rfind("quantize.imatrix.", 0) == 0) continue;  // set below
    LS_RETURN_IF_ERROR(w.add(kv.key, override_value(kv.key).value_or(kv.value)));
  }
  for (const char* key : {"general.quantization_version", "general.file_type"}) {
    if (!f.has(key)) LS_RETURN_IF_ERROR(w.add(key, *override_value(key)));
  }
  if (o.imatrix) {
    LS_RETURN_IF_ERROR(w.add("quantize.imatrix.file", GgufValue::string(o.imatrix_path)));
    if (!o.imatrix->datasets.empty()) {
      LS_RETURN_IF_ERROR(w.add("quantize.imatrix.dataset", GgufValue::string(o.imatrix->datasets[0])));
    }
    LS_RETURN_IF_ERROR(w.add("quantize.imatrix.entries_count",
                             GgufValue::i32(static_cast<int32_t>(o.imatrix->entries.size()))));
    LS_RETURN_IF_ERROR(w.add("quantize.imatrix.chunks_count", GgufValue::i32(static_cast<int32_t>(o.imatrix->chunk_count))));
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    LS_RETURN_IF_ERROR(w.add_tensor(t.name, t.dims, plan[i].type));
  }
  return w;
}

// Buffers of one worker's chunk of rows.
struct Chunk {
  std::vector<uint8_t> raw;
  std::vector<float> f;
  std::vector<uint8_t> out;
  Status status;
};

// Re-encodes one tensor in batches of chunks, one chunk per thread, writing
// batch k while batch k + 1 is encoded.
class TensorEncoder {
 public:
  TensorEncoder(const ByteSource& src, const GgufTensorInfo& t, GgmlType to, const std::vector<float>* im, unsigned threads)
      : src_(src), t_(t), to_(to), im_(im), threads_(threads) {
    row_ = t.dims[0];
    rows_ = t.n_elements() / row_;
    rows_per_matrix_ = t.dims.size() >= 2 ? t.dims[1] : rows_;
    rows_per_chunk_ = std::max<uint64_t>(1, kChunkElems / row_);
    n_chunks_ = (rows_ + rows_per_chunk_ - 1) / rows_per_chunk_;
    in_row_bytes_ = ggml_row_bytes(ggml_type_traits(t.type), row_);
    out_row_bytes_ = ggml_row_bytes(ggml_type_traits(to), row_);
  }

  Status run(TensorSink& sink, const std::atomic<bool>* cancel, const std::function<void(uint64_t)>& on_bytes) {
    std::vector<Chunk> sets[2] = {std::vector<Chunk>(threads_), std::vector<Chunk>(threads_)};
    uint64_t prev_n = 0;
    for (uint64_t c0 = 0, k = 0; c0 < n_chunks_ || prev_n > 0; c0 += threads_, ++k) {
      if (cancel && cancel->load()) return Status::Cancelled("quantizing was interrupted");
      const uint64_t n = c0 < n_chunks_ ? std::min<uint64_t>(threads_, n_chunks_ - c0) : 0;
      std::vector<Chunk>& cur = sets[k % 2];
      std::vector<std::thread> pool;
      for (uint64_t i = 1; i < n; ++i) pool.emplace_back([&, i] { encode_chunk(c0 + i, cur[i]); });
      Status written = prev_n > 0 ? write_batch(sets[(k + 1) % 2], prev_n, sink, on_bytes) : Status::OK();
      if (n > 0) encode_chunk(c0, cur[0]);
      for (auto& th : pool) th.join();
      LS_RETURN_IF_ERROR(written);
      prev_n = n;
    }
    return Status::OK();
  }

 private:
  Status write_batch(std::vector<Chunk>& set, uint64_t n, TensorSink& sink,
                     const std::function<void(uint64_t)>& on_bytes) {
    for (uint64_t i = 0; i < n; ++i) {
      LS_RETURN_IF_ERROR(set[i].status);
      LS_RETURN_IF_ERROR(sink.write(set[i].out.data(), set[i].out.size()));
      if (on_bytes) on_bytes(set[i].raw.size());
    }
    return Status::OK();
  }

  void encode_chunk(uint64_t c, Chunk& ch) {
    const uint64_t r0 = c * rows_per_chunk_, r1 = std::min(rows_, r0 + rows_per_chunk_);
    ch.raw.resize((r1 - r0) * in_row_bytes_);
    ch.out.resize((r1 - r0) * out_row_bytes_);
    ch.f.resize(row_);
    ch.status = src_.read_at(t_.offset + r0 * in_row_bytes_, ch.raw.data(), ch.raw.size());
    for (uint64_t r = r0; r < r1 && ch.status.ok(); ++r) {
      uint8_t* out = ch.out.data() + (r - r0) * out_row_bytes_;
      const float* w = im_ ? im_->data() + (r / rows_per_matrix_) * row_ : nullptr;
      ch.status = math::decode_row(t_.type, ch.raw.data() + (r - r0) * in_row_bytes_, row_, ch.f.data());
      if (ch.status.ok()) ch.status = check_finite(ch.f, r, "holds", t_.type);
      if (ch.status.ok()) ch.status = math::encode_row(to_, ch.f.data(), row_, out, w);
      if (ch.status.ok()) ch.status = math::decode_row(to_, out, row_, ch.f.data());
      if (ch.status.ok()) ch.status = check_finite(ch.f, r, "encodes to", to_);
    }
  }

  // The input row holds only finite values (the encoders assume it), and the
  // encoded row decodes to finite values (a scale beyond f16's range would not).
  Status check_finite(const std::vector<float>& v, uint64_t r, const char* what, GgmlType type) const {
    for (uint64_t j = 0; j < row_; ++j) {
      if (!std::isfinite(v[j])) {
        return Status::Corruption(fmt::format("tensor '{}' row {} element {} {} {} in {}", t_.name, r, j, what, v[j],
                                              ggml_type_traits(type).name));
      }
    }
    return Status::OK();
  }

  const ByteSource& src_;
  const GgufTensorInfo& t_;
  GgmlType to_;
  const std::vector<float>* im_;
  unsigned threads_;
  uint64_t row_, rows_, rows_per_matrix_, rows_per_chunk_, n_chunks_, in_row_bytes_, out_row_bytes_;
};

Status copy_tensor(const ByteSource& src, const GgufTensorInfo& t, TensorSink& sink) {
  std::vector<uint8_t> buf(std::min<uint64_t>(kCopyBytes, t.n_bytes));
  for (uint64_t off = 0; off < t.n_bytes; off += buf.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), t.n_bytes - off));
    LS_RETURN_IF_ERROR(src.read_at(t.offset + off, buf.data(), n));
    LS_RETURN_IF_ERROR(sink.write(buf.data(), n));
  }
  return Status::OK();
}

// The finished file holds exactly the tensors the writer declared.
Status verify_output(const std::string& path, const GgufWriter& w) {
  LS_ASSIGN_OR_RETURN(GgufFile f, read_gguf_file(path));
  if (f.tensors().size() != w.tensors().size() || f.file_size() != w.file_size()) {
    return Status::Corruption(fmt::format("{}: the written file does not match its layout", path));
  }
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& a = f.tensors()[i];
    const auto& b = w.tensors()[i];
    if (a.name != b.name || a.type != b.type || a.dims != b.dims || a.n_bytes != b.n_bytes) {
      return Status::Corruption(fmt::format("{}: tensor '{}' was written differently from its layout", path, b.name));
    }
  }
  return Status::OK();
}

}  // namespace

Result<QuantizeReport> quantize_model(const std::string& in_path, const std::string& out_path,
                                      const QuantizeOptions& o) {
  LS_RETURN_IF_ERROR(check_distinct_files(in_path, out_path));
  LS_ASSIGN_OR_RETURN(auto src, FileByteSource::open(in_path));
  GgufReadOptions ro;
  ro.allow_unsupported_types = true;  // tensors copied as they are need not be decodable
  LS_ASSIGN_OR_RETURN(GgufFile in, read_gguf(*src, ro));
  LS_ASSIGN_OR_RETURN(std::vector<TensorPlan> plan,
                      plan_quantization(in, o.target, PlanOptions{o.pure, o.imatrix != nullptr}));
  LS_RETURN_IF_ERROR(check_conversions(in, plan, o));
  LS_ASSIGN_OR_RETURN(GgufWriter w, output_layout(in, plan, o));
  LS_RETURN_IF_ERROR(check_free_disk(out_path, w.file_size(), "the quantized model"));

  QuantizeReport rep;
  rep.in_bytes = in.file_size();
  rep.out_bytes = w.file_size();
  rep.n_tensors = plan.size();
  QuantizeProgress prog;
  prog.n_tensors = plan.size();
  for (const auto& t : in.tensors()) prog.total_bytes += t.n_bytes;
  const unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());

  auto fill = [&](size_t i, const GgufTensorInfo&, TensorSink& sink) -> Status {
    const GgufTensorInfo& t = in.tensors()[i];
    prog.tensor = i;
    prog.name = t.name;
    prog.from = t.type;
    prog.to = plan[i].type;
    prog.tensor_done = false;
    if (!plan[i].convert) {
      LS_RETURN_IF_ERROR(copy_tensor(*src, t, sink));
      prog.done_bytes += t.n_bytes;
    } else {
      const std::vector<float>* im = o.imatrix ? o.imatrix->find(t.name) : nullptr;
      ++rep.n_converted;
      rep.n_fallback += plan[i].fallback ? 1 : 0;
      rep.n_imatrix += im ? 1 : 0;
      if (o.imatrix && !im) logger().warn("no importance matrix entry for {}: quantised without one", t.name);
      TensorEncoder enc(*src, t, plan[i].type, im, threads);
      LS_RETURN_IF_ERROR(enc.run(sink, o.cancel, [&](uint64_t bytes) {
        prog.done_bytes += bytes;
        if (o.progress) o.progress(prog);
      }));
    }
    prog.tensor_done = true;
    if (o.progress) o.progress(prog);
    return Status::OK();
  };
  GgufWriter::WriteOptions wo;
  wo.cancel = o.cancel;
  wo.fsync = o.fsync;
  LS_RETURN_IF_ERROR(w.write(out_path, fill, wo));
  if (Status s = verify_output(out_path, w); !s.ok()) {
    ::unlink(out_path.c_str());
    return s;
  }
  return rep;
}

}  // namespace layerstream

#include "runtime/model/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <unordered_set>

#include "runtime/core/status_macros.h"

namespace layerstream {

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}
uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Buffered sequential writer over a file descriptor (owned by the caller).
class FdWriter {
 public:
  FdWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buf_.reserve(kBuf); }
  Status write(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    if (buf_.size() + n > kBuf) LS_RETURN_IF_ERROR(flush());
    if (n >= kBuf) return write_all(p, n);
    buf_.insert(buf_.end(), p, p + n);
    return Status::OK();
  }
  Status zeros(size_t n) {
    static const uint8_t kZero[4096] = {};
    while (n > 0) {
      size_t k = std::min(n, sizeof(kZero));
      LS_RETURN_IF_ERROR(write(kZero, k));
      n -= k;
    }
    return Status::OK();
  }
  Status flush() {
    Status s = write_all(buf_.data(), buf_.size());
    buf_.clear();
    return s;
  }
  uint64_t written() const { return written_ + buf_.size(); }

 private:
  static constexpr size_t kBuf = 1 << 20;
  Status write_all(const uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t r = ::write(fd_, p, n);
      if (r < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(fmt::format("cannot write {} at byte {}", path_, written_), errno);
      }
      p += r;
      n -= static_cast<size_t>(r);
      written_ += static_cast<uint64_t>(r);
    }
    return Status::OK();
  }
  int fd_;
  std::string path_;
  std::vector<uint8_t> buf_;
  uint64_t written_ = 0;
};

class CountingSink final : public TensorSink {
 public:
  CountingSink(FdWriter& w, const GgufTensorInfo& t) : w_(w), t_(t) {}
  Status write(const void* data, size_t n) override {
    if (n > t_.n_bytes - done_) {
      return Status::Internal(fmt::format("tensor '{}': fill wrote {} bytes past its size {}", t_.name,
                                          done_ + n - t_.n_bytes, t_.n_bytes));
    }
    done_ += n;
    return w_.write(data, n);
  }
  uint64_t done() const { return done_; }

 private:
  FdWriter& w_;
  const GgufTensorInfo& t_;
  uint64_t done_ = 0;
};

}  // namespace

void gguf_encode_value(const GgufValue& v, std::vector<uint8_t>& out) {
  switch (v.type()) {
    case GgufType::kString: put_string(out, v.as_string()); return;
    case GgufType::kArray:
      put<uint32_t>(out, static_cast<uint32_t>(v.array_type()));
      put<uint64_t>(out, v.array_size());
      if (v.array_type() == GgufType::kString) {
        for (const auto& s : v.array_strings()) put_string(out, s);
      } else {
        out.insert(out.end(), v.array_bytes().begin(), v.array_bytes().end());
      }
      return;
    default: {
      const uint64_t raw = v.raw_u64();
      const auto* p = reinterpret_cast<const uint8_t*>(&raw);
      out.insert(out.end(), p, p + gguf_scalar_size(v.type()));
    }
  }
}

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  LS_CHECK_MSG(std::has_single_bit(alignment) && alignment >= kGgufMinAlignment && alignment <= kGgufMaxAlignment,
               "GgufWriter alignment must be a power of two in 8..65536");
  if (alignment != kGgufDefaultAlignment) kvs_.push_back({"general.alignment", GgufValue::u32(alignment)});
}

Status GgufWriter::add(std::string key, GgufValue value) {
  if (key.empty()) return Status::InvalidArgument("GGUF metadata key is empty");
  for (const auto& kv : kvs_) {
    if (kv.key == key) return Status::InvalidArgument("duplicate GGUF metadata key '" + key + "'");
  }
  kvs_.push_back({std::move(key), std::move(value)});
  return Status::OK();
}

Status GgufWriter::add_tensor(std::string name, std::vector<uint64_t> dims, GgmlType type) {
  if (name.empty() || name.size() > kGgufMaxTensorName) {
    return Status::InvalidArgument(fmt::format("tensor name '{}' must be 1..{} bytes", name, kGgufMaxTensorName));
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return Status::InvalidArgument("duplicate tensor name '" + name + "'");
  }
  if (dims.empty() || dims.size() > kGgufMaxDims) {
    return Status::InvalidArgument(fmt::format("tensor '{}': {} dimensions (allowed 1..4)", name, dims.size()));
  }
  const GgmlTypeTraits tr = ggml_type_traits(type);
  if (!tr.supported) {
    return Status::Unsupported(fmt::format("unsupported tensor type {} (id {})", tr.name, static_cast<uint32_t>(type)));
  }
  uint64_t n = 1;
  for (uint64_t d : dims) {
    if (d == 0 || d > (uint64_t{1} << 40) || n > (uint64_t{1} << 50) / d) {
      return Status::InvalidArgument(fmt::format("tensor '{}': bad dimension {}", name, d));
    }
    n *= d;
  }
  if (dims[0] % tr.block_elems != 0) {
    return Status::InvalidArgument(fmt::format("tensor '{}': ne0 = {} is not a multiple of the {} block size {}",
                                               name, dims[0], tr.name, tr.block_elems));
  }
  GgufTensorInfo t;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.type = type;
  t.n_bytes = n / tr.block_elems * tr.block_bytes;
  t.rel_offset = data_bytes_;
  data_bytes_ += align_up(t.n_bytes, alignment_);
  tensors_.push_back(std::move(t));
  return Status::OK();
}

namespace {
std::vector<uint8_t> encode_header(const std::vector<GgufKeyValue>& kvs, const std::vector<GgufTensorInfo>& tensors) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, kGgufMagic);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors.size());
  put<uint64_t>(out, kvs.size());
  for (const auto& kv : kvs) {
    put_string(out, kv.key);
    put<uint32_t>(out, static_cast<uint32_t>(kv.value.type()));
    gguf_encode_value(kv.value, out);
  }
  for (const auto& t : tensors) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) put<uint64_t>(out, d);
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, t.rel_offset);
  }
  return out;
}
}  // namespace

std::vector<uint8_t> GgufWriter::header() const { return encode_header(kvs_, tensors_); }
uint64_t GgufWriter::data_offset() const { return align_up(encode_header(kvs_, tensors_).size(), alignment_); }
uint64_t GgufWriter::file_size() const {
  // The last tensor is padded too, so the file ends on an alignment boundary.
  return data_offset() + data_bytes_;
}

Status GgufWriter::write(const std::string& path, const FillFn& fill, const WriteOptions& opt) const {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("cannot create " + tmp, errno);
  auto body = [&]() -> Status {
    FdWriter w(fd, tmp);
    std::vector<uint8_t> header = encode_header(kvs_, tensors_);
    const uint64_t data_off = align_up(header.size(), alignment_);
    LS_RETURN_IF_ERROR(w.write(header.data(), header.size()));
    LS_RETURN_IF_ERROR(w.zeros(data_off - header.size()));
    const uint64_t total = data_off + data_bytes_;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (opt.cancel && opt.cancel->load()) return Status::Cancelled("writing " + path + " was interrupted");
      GgufTensorInfo t = tensors_[i];
      t.offset = data_off + t.rel_offset;
      LS_CHECK(w.written() == t.offset);
      CountingSink sink(w, t);
      LS_RETURN_IF_ERROR(fill(i, t, sink));
      if (sink.done() != t.n_bytes) {
        return Status::Internal(fmt::format("tensor '{}': fill wrote {} of {} bytes", t.name, sink.done(), t.n_bytes));
      }
      LS_RETURN_IF_ERROR(w.zeros(align_up(t.n_bytes, alignment_) - t.n_bytes));
      if (opt.progress) opt.progress(w.written(), total);
    }
    LS_RETURN_IF_ERROR(w.flush());
    if (opt.cancel && opt.cancel->load()) return Status::Cancelled("writing " + path + " was interrupted");
    if (opt.fsync && ::fsync(fd) != 0) return Status::FromErrno("cannot fsync " + tmp, errno);
    return Status::OK();
  };
  Status s = body();
  if (::close(fd) != 0 && s.ok()) s = Status::FromErrno("cannot close " + tmp, errno);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = Status::FromErrno("cannot rename " + tmp + " to " + path, errno);
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

}  // namespace layerstream

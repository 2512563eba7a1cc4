// The GGUF parser: every file-supplied number is checked against the bytes
// left and for overflow before it is used or allocated from.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>

#include "runtime/core/status_macros.h"
#include "runtime/model/gguf_file.h"

namespace layerstream {

uint64_t GgufTensorInfo::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

std::string GgufTensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

const std::vector<std::string>& gguf_token_id_keys() {
  static const std::vector<std::string> kKeys = {
      "tokenizer.ggml.bos_token_id",  "tokenizer.ggml.eos_token_id",  "tokenizer.ggml.unknown_token_id",
      "tokenizer.ggml.padding_token_id", "tokenizer.ggml.separator_token_id", "tokenizer.ggml.cls_token_id",
      "tokenizer.ggml.mask_token_id", "tokenizer.ggml.eot_token_id",  "tokenizer.ggml.eom_token_id"};
  return kKeys;
}

class GgufParser {
 public:
  GgufParser(const ByteSource& src, const GgufReadOptions& options) : src_(src), in_(src), options_(options) {}

  Result<GgufFile> parse() {
    f_.path_ = src_.name();
    f_.file_size_ = src_.size();
    LS_RETURN_IF_ERROR(parse_header());
    LS_RETURN_IF_ERROR(parse_metadata());
    LS_RETURN_IF_ERROR(parse_alignment());
    LS_RETURN_IF_ERROR(parse_tensor_infos());
    LS_RETURN_IF_ERROR(place_tensors());
    LS_RETURN_IF_ERROR(check_token_ids());
    return std::move(f_);
  }

 private:
  template <typename... Args>
  Status corrupt(uint64_t at, fmt::format_string<Args...> f, Args&&... args) {
    return Status::Corruption(fmt::format("{}: at byte {}: {}", src_.name(), at,
                                          fmt::format(f, std::forward<Args>(args)...)));
  }

  template <typename T>
  Status read_pod(T& v, const char* what) { return in_.read(&v, sizeof(T), what); }

  Status read_string(std::string& out, const char* what, const std::string& context) {
    const uint64_t at = in_.offset();
    uint64_t len = 0;
    LS_RETURN_IF_ERROR(read_pod(len, what));
    if (len > kGgufMaxStringBytes) {
      return corrupt(at, "{} {}: string length {} exceeds the limit of {} bytes", what, context, len,
                     kGgufMaxStringBytes);
    }
    if (len > in_.remaining()) {
      return corrupt(at, "{} {}: string length {} extends past the end of the file ({} bytes remain)", what,
                     context, len, in_.remaining());
    }
    out.resize(static_cast<size_t>(len));
    return in_.read(out.data(), out.size(), what);
  }

  Status parse_header() {
    uint32_t magic = 0, version = 0;
    LS_RETURN_IF_ERROR(read_pod(magic, "the magic"));
    if (magic != kGgufMagic) {
      char m[4];
      std::memcpy(m, &magic, 4);
      std::string shown;
      for (char c : m) shown += (c >= 32 && c < 127) ? std::string(1, c) : fmt::format("\\x{:02x}", uint8_t(c));
      return corrupt(0, "bad magic \"{}\" (0x{:08x}); expected \"GGUF\": not a GGUF file", shown, magic);
    }
    LS_RETURN_IF_ERROR(read_pod(version, "the version"));
    if (version != 2 && version != 3) {
      if ((version & 0xFFFFu) == 0 && version != 0) {
        return Status::Unsupported(fmt::format(
            "{}: at byte 4: version field reads {} (0x{:08x}): this looks like a byte-swapped (big-endian) file, "
            "which layerstream does not read",
            src_.name(), version, version));
      }
      return Status::Unsupported(
          fmt::format("{}: at byte 4: GGUF version {} is not supported (supported: 2, 3)", src_.name(), version));
    }
    f_.version_ = version;
    LS_RETURN_IF_ERROR(read_pod(n_tensors_, "the tensor count"));
    LS_RETURN_IF_ERROR(read_pod(n_kv_, "the metadata key count"));
    // Lower bounds on the bytes each entry occupies: a key/value pair is at
    // least a 1-byte key (8 + 1), a type (4) and a 1-byte value; a tensor info
    // at least a 1-byte name (9), n_dims (4), one dim (8), type (4), offset (8).
    constexpr uint64_t kMinKv = 8 + 1 + 4 + 1, kMinTensor = 9 + 4 + 8 + 4 + 8;
    const uint64_t left = in_.remaining();
    if (n_tensors_ > left / kMinTensor) {
      return corrupt(8, "tensor count {} cannot fit in the {} bytes left (limit {})", n_tensors_, left,
                     left / kMinTensor);
    }
    if (n_kv_ > left / kMinKv) {
      return corrupt(16, "metadata key count {} cannot fit in the {} bytes left (limit {})", n_kv_, left,
                     left / kMinKv);
    }
    if (n_tensors_ * kMinTensor + n_kv_ * kMinKv > left) {
      return corrupt(8, "{} tensors and {} metadata keys cannot fit in the {} bytes left", n_tensors_, n_kv_, left);
    }
    return Status::OK();
  }

  Status read_value(GgufType type, GgufValue& out, const std::string& key, uint64_t type_at) {
    if (static_cast<uint32_t>(type) >= kGgufTypeCount) {
      return corrupt(type_at, "key '{}': unknown value type {} (valid: 0..{})", key, static_cast<uint32_t>(type),
                     kGgufTypeCount - 1);
    }
    if (type == GgufType::kString) {
      std::string s;
      LS_RETURN_IF_ERROR(read_string(s, "a string value", "of key '" + key + "'"));
      out = GgufValue::string(std::move(s));
      return Status::OK();
    }
    if (type == GgufType::kArray) {
      const uint64_t at = in_.offset();
      uint32_t elem_raw = 0;
      uint64_t count = 0;
      LS_RETURN_IF_ERROR(read_pod(elem_raw, "an array element type"));
      if (elem_raw >= kGgufTypeCount) {
        return corrupt(at, "key '{}': array of unknown value type {} (valid: 0..{})", key, elem_raw,
                       kGgufTypeCount - 1);
      }
      const auto elem = static_cast<GgufType>(elem_raw);
      if (elem == GgufType::kArray) return corrupt(at, "key '{}': nested arrays are not allowed", key);
      LS_RETURN_IF_ERROR(read_pod(count, "an array length"));
      if (count > kGgufMaxArrayElems) {
        return corrupt(at + 4, "key '{}': array of {} elements exceeds the limit of {}", key, count,
                       kGgufMaxArrayElems);
      }
      const uint64_t min_elem = elem == GgufType::kString ? 8 : gguf_scalar_size(elem);
      if (count * min_elem > in_.remaining()) {  // count <= 2^30, min_elem <= 8: no overflow
        return corrupt(at + 4, "key '{}': array of {} x {} needs at least {} bytes but only {} remain", key, count,
                       gguf_type_name(elem), count * min_elem, in_.remaining());
      }
      if (elem == GgufType::kString) {
        std::vector<std::string> strings(static_cast<size_t>(count));
        for (uint64_t i = 0; i < count; ++i) {
          LS_RETURN_IF_ERROR(read_string(strings[i], "an array string", fmt::format("{}[{}]", key, i)));
        }
        out = GgufValue::string_array(std::move(strings));
      } else {
        std::vector<uint8_t> bytes(static_cast<size_t>(count * min_elem));
        LS_RETURN_IF_ERROR(in_.read(bytes.data(), bytes.size(), "array elements"));
        out = GgufValue::numeric_array(elem, std::move(bytes));
      }
      return Status::OK();
    }
    uint8_t buf[8];
    const size_t n = gguf_scalar_size(type);
    LS_RETURN_IF_ERROR(in_.read(buf, n, "a scalar value"));
    out = GgufValue::scalar(type, buf, n);
    return Status::OK();
  }

  Status parse_metadata() {
    f_.kvs_.reserve(static_cast<size_t>(n_kv_));
    for (uint64_t i = 0; i < n_kv_; ++i) {
      const uint64_t key_at = in_.offset();
      GgufKeyValue kv;
      LS_RETURN_IF_ERROR(read_string(kv.key, "a metadata key", fmt::format("(key #{})", i)));
      if (kv.key.empty()) return corrupt(key_at, "metadata key #{} is empty", i);
      if (f_.kv_index_.count(kv.key)) return corrupt(key_at, "duplicate metadata key '{}' (key #{})", kv.key, i);
      const uint64_t type_at = in_.offset();
      uint32_t type = 0;
      LS_RETURN_IF_ERROR(read_pod(type, "a value type"));
      LS_RETURN_IF_ERROR(read_value(static_cast<GgufType>(type), kv.value, kv.key, type_at));
      kv_offsets_.push_back(key_at);
      f_.kv_index_.emplace(kv.key, f_.kvs_.size());
      f_.kvs_.push_back(std::move(kv));
    }
    return Status::OK();
  }

  Status parse_alignment() {
    auto it = f_.kv_index_.find("general.alignment");
    if (it == f_.kv_index_.end()) return Status::OK();
    const GgufValue& v = f_.kvs_[it->second].value;
    const uint64_t at = kv_offsets_[it->second];
    if (v.type() != GgufType::kUint32) {
      return corrupt(at, "general.alignment has type {}; expected UINT32", gguf_type_name(v.type()));
    }
    const uint64_t a = v.raw_u64();
    if (a == 0 || !std::has_single_bit(a)) {
      return corrupt(at, "general.alignment = {} is not a power of two", a);
    }
    if (a < kGgufMinAlignment || a > kGgufMaxAlignment) {
      return corrupt(at, "general.alignment = {} is outside the allowed range {}..{}", a, kGgufMinAlignment,
                     kGgufMaxAlignment);
    }
    f_.alignment_ = static_cast<uint32_t>(a);
    return Status::OK();
  }

  Status parse_tensor_infos() {
    f_.tensors_.reserve(static_cast<size_t>(n_tensors_));
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      const uint64_t at = in_.offset();
      GgufTensorInfo t;
      LS_RETURN_IF_ERROR(read_string(t.name, "a tensor name", fmt::format("(tensor #{})", i)));
      if (t.name.empty()) return corrupt(at, "tensor #{} has an empty name", i);
      if (t.name.size() > kGgufMaxTensorName) {
        return corrupt(at, "tensor #{} name '{}...' is {} bytes long (limit {})", i, t.name.substr(0, 32),
                       t.name.size(), kGgufMaxTensorName);
      }
      if (f_.tensor_index_.count(t.name)) return corrupt(at, "duplicate tensor name '{}' (tensor #{})", t.name, i);
      const uint64_t dims_at = in_.offset();
      uint32_t n_dims = 0;
      LS_RETURN_IF_ERROR(read_pod(n_dims, "a tensor's n_dims"));
      if (n_dims == 0 || n_dims > kGgufMaxDims) {
        return corrupt(dims_at, "tensor '{}': n_dims = {} (allowed 1..{})", t.name, n_dims, kGgufMaxDims);
      }
      t.dims.resize(n_dims);
      uint64_t n_elems = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t dim_at = in_.offset();
        LS_RETURN_IF_ERROR(read_pod(t.dims[d], "a tensor dimension"));
        const auto signed_dim = static_cast<int64_t>(t.dims[d]);
        if (signed_dim <= 0) {
          return corrupt(dim_at, "tensor '{}': dimension ne{} = {} (must be positive)", t.name, d, signed_dim);
        }
        if (n_elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / t.dims[d]) {
          return corrupt(dim_at, "tensor '{}': element count of shape {} overflows 63 bits", t.name,
                         fmt::format("{}", fmt::join(std::vector<uint64_t>(t.dims.begin(), t.dims.begin() + d + 1), "x")));
        }
        n_elems *= t.dims[d];
      }
      const uint64_t type_at = in_.offset();
      uint32_t type_id = 0;
      LS_RETURN_IF_ERROR(read_pod(type_id, "a tensor type"));
      auto traits = ggml_type_traits(type_id);
      if (!traits) {
        return corrupt(type_at, "tensor '{}': {} is not a valid tensor type", t.name, ggml_type_name(type_id));
      }
      if (!traits->supported && !options_.allow_unsupported_types) {
        return Status::Unsupported(fmt::format("{}: at byte {}: tensor '{}': unsupported tensor type {} (id {})",
                                               src_.name(), type_at, t.name, traits->name, type_id));
      }
      t.type = traits->type;
      if (t.dims[0] % traits->block_elems != 0) {
        return corrupt(dims_at, "tensor '{}': first dimension ne0 = {} is not a multiple of the {} block size {}",
                       t.name, t.dims[0], traits->name, traits->block_elems);
      }
      // n_elems < 2^63 and block_bytes <= 2^8 per element at most, but check anyway.
      const uint64_t n_blocks = n_elems / traits->block_elems;
      if (n_blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes) {
        return corrupt(dims_at, "tensor '{}': byte size of {} blocks of {} overflows 64 bits", t.name, n_blocks,
                       traits->name);
      }
      t.n_bytes = n_blocks * traits->block_bytes;
      // Checked before padding: a size near 2^64 would wrap to 0 when rounded up.
      if (t.n_bytes > std::numeric_limits<uint64_t>::max() - (f_.alignment_ - 1)) {
        return corrupt(dims_at, "tensor '{}': byte size {} overflows when padded to {} bytes", t.name, t.n_bytes,
                       f_.alignment_);
      }
      const uint64_t off_at = in_.offset();
      LS_RETURN_IF_ERROR(read_pod(t.rel_offset, "a tensor offset"));
      if (t.rel_offset % f_.alignment_ != 0) {
        return corrupt(off_at, "tensor '{}': data offset {} is not a multiple of the alignment {}", t.name,
                       t.rel_offset, f_.alignment_);
      }
      tensor_offsets_.push_back(off_at);
      f_.tensor_index_.emplace(t.name, f_.tensors_.size());
      f_.tensors_.push_back(std::move(t));
    }
    return Status::OK();
  }

  Status place_tensors() {
    const uint64_t end_of_infos = in_.offset();
    const uint64_t a = f_.alignment_;
    f_.data_offset_ = (end_of_infos + a - 1) / a * a;  // end_of_infos <= file size: no overflow
    if (!f_.tensors_.empty() && f_.data_offset_ > f_.file_size_) {
      return corrupt(end_of_infos, "the data section would start at byte {}, past the end of the file ({} bytes)",
                     f_.data_offset_, f_.file_size_);
    }
    const uint64_t data_bytes = f_.file_size_ >= f_.data_offset_ ? f_.file_size_ - f_.data_offset_ : 0;
    for (size_t i = 0; i < f_.tensors_.size(); ++i) {
      GgufTensorInfo& t = f_.tensors_[i];
      if (t.rel_offset > data_bytes || t.n_bytes > data_bytes - t.rel_offset) {
        return corrupt(tensor_offsets_[i],
                       "tensor '{}': data [{}, +{}) relative to the data section at byte {} extends past the end "
                       "of the file ({} bytes)",
                       t.name, t.rel_offset, t.n_bytes, f_.data_offset_, f_.file_size_);
      }
      t.offset = f_.data_offset_ + t.rel_offset;
    }
    std::vector<size_t> order(f_.tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return f_.tensors_[x].offset < f_.tensors_[y].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& prev = f_.tensors_[order[k - 1]];
      const GgufTensorInfo& cur = f_.tensors_[order[k]];
      if (cur.offset < prev.end()) {
        return corrupt(tensor_offsets_[order[k]], "tensor '{}' at byte {} overlaps tensor '{}' (bytes {}..{})",
                       cur.name, cur.offset, prev.name, prev.offset, prev.end());
      }
    }
    return Status::OK();
  }

  Status check_token_ids() {
    auto it = f_.kv_index_.find("tokenizer.ggml.tokens");
    if (it == f_.kv_index_.end()) return Status::OK();
    const GgufValue& tokens = f_.kvs_[it->second].value;
    if (!tokens.is_array() || tokens.array_type() != GgufType::kString) {
      return corrupt(kv_offsets_[it->second], "tokenizer.ggml.tokens has type {}; expected ARRAY of STRING",
                     tokens.is_array() ? "ARRAY of " + gguf_type_name(tokens.array_type()) : gguf_type_name(tokens.type()));
    }
    const uint64_t n_vocab = tokens.array_size();
    for (const std::string& key : gguf_token_id_keys()) {
      auto k = f_.kv_index_.find(key);
      if (k == f_.kv_index_.end()) continue;
      const GgufValue& v = f_.kvs_[k->second].value;
      if (!gguf_is_integer(v.type())) {
        return corrupt(kv_offsets_[k->second], "{} has type {}; expected an integer token id", key,
                       gguf_type_name(v.type()));
      }
      const int64_t id = v.as_int();
      if (id < 0 || static_cast<uint64_t>(id) >= n_vocab) {
        return corrupt(kv_offsets_[k->second], "{} = {} is outside the vocabulary (0..{})", key, id,
                       n_vocab == 0 ? 0 : n_vocab - 1);
      }
    }
    for (const char* key : {"tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
      auto k = f_.kv_index_.find(key);
      if (k == f_.kv_index_.end()) continue;
      const GgufValue& v = f_.kvs_[k->second].value;
      if (!v.is_array() || v.array_size() != n_vocab) {
        return corrupt(kv_offsets_[k->second], "{} must be an array of {} elements (one per token); found {}", key,
                       n_vocab, v.to_string());
      }
    }
    return Status::OK();
  }

  const ByteSource& src_;
  BufferedReader in_;
  GgufReadOptions options_;
  GgufFile f_;
  uint64_t n_tensors_ = 0, n_kv_ = 0;
  std::vector<uint64_t> kv_offsets_;      // byte offset of each key
  std::vector<uint64_t> tensor_offsets_;  // byte offset of each tensor's offset field
};

Result<GgufFile> read_gguf(const ByteSource& src, const GgufReadOptions& options) {
  return GgufParser(src, options).parse();
}

Result<GgufFile> read_gguf_file(const std::string& path, const GgufReadOptions& options) {
  LS_ASSIGN_OR_RETURN(auto src, FileByteSource::open(path));
  return read_gguf(*src, options);
}

}  // namespace layerstream

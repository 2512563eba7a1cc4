// A parsed and validated GGUF file (v3; v2 is identical on disk for
// little-endian files): metadata, tensor infos and the data layout.
// See docs/GGUF.md for every check the reader makes.
//
// The parser never reads tensor data: each tensor records its absolute file
// offset and byte size, and every tensor is proven to lie inside the file,
// aligned, and disjoint from the others. A GgufFile is a plain value (no open
// file handle); it is immutable after parsing and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"
#include "runtime/model/byte_source.h"
#include "runtime/model/gguf_value.h"

namespace layerstream {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian uint32
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMinAlignment = 8;
inline constexpr uint32_t kGgufMaxAlignment = 64 * 1024;
inline constexpr uint64_t kGgufMaxStringBytes = uint64_t{1} << 30;
inline constexpr uint64_t kGgufMaxArrayElems = uint64_t{1} << 30;
inline constexpr size_t kGgufMaxTensorName = 63;  // bytes, as ggml's GGML_MAX_NAME - 1
inline constexpr uint32_t kGgufMaxDims = 4;

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ne0 first (ne0 is the contiguous dimension); 1..4 entries
  GgmlType type = GgmlType::F32;
  uint64_t rel_offset = 0;     // offset from the start of the data section, as stored
  uint64_t offset = 0;         // absolute file offset of the first byte
  uint64_t n_bytes = 0;        // exact size of the data (without padding)

  uint64_t n_elements() const;
  uint64_t end() const { return offset + n_bytes; }
  // "[4096, 32000]"
  std::string shape_string() const;
  bool operator==(const GgufTensorInfo& o) const = default;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

class GgufFile {
 public:
  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return file_size_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // first byte of the data section

  const std::vector<GgufKeyValue>& metadata() const { return kvs_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. NotFound "<file>: metadata key 'K' is missing" when absent;
  // Corruption naming key, expected and actual type on a type mismatch;
  // Corruption naming the value and the range when it does not fit.
  Result<uint64_t> get_uint(std::string_view key) const;      // any integer type, >= 0
  Result<uint32_t> get_u32(std::string_view key) const;       // any integer type, 0..2^32-1
  Result<int64_t> get_int(std::string_view key) const;        // any integer type
  Result<double> get_float(std::string_view key) const;       // FLOAT32 / FLOAT64
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  // An array whose elements are `elem` (STRING) or, for kInt32/kFloat32, any
  // integer / float type respectively.
  Result<const GgufValue*> get_array(std::string_view key, GgufType elem) const;
  // As above, but `fallback` when the key is absent (a wrong type still fails).
  Result<uint32_t> get_u32_or(std::string_view key, uint32_t fallback) const;
  Result<double> get_float_or(std::string_view key, double fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;
  Result<std::string> get_string_or(std::string_view key, std::string fallback) const;

  // The parser fills these.
  friend class GgufParser;

 private:
  Status wrong_type(std::string_view key, const GgufValue& v, std::string_view expected) const;
  // The scalar value of `key` when present and of a type `accepts`; NotFound
  // or Corruption (naming the key and `expected`) otherwise.
  Result<const GgufValue*> find_typed(std::string_view key, bool (*accepts)(GgufType), std::string_view expected) const;
  std::string path_;
  uint32_t version_ = 3;
  uint64_t file_size_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

struct GgufReadOptions {
  // Accept tensors of known GGML types that layerstream cannot compute with
  // (e.g. IQ2_XXS): `inspect` shows such files; whoever runs the model must
  // check each tensor's type (load_llama_model does).
  bool allow_unsupported_types = false;
};

// Parses and validates a GGUF file. Errors: IOError (cannot open/read),
// Corruption (breaks the format; the message names the file, the field or
// tensor, the byte offset, the value and the limit), Unsupported (a valid
// but unsupported version or tensor type, "unsupported tensor type IQ2_XXS (id 16)").
Result<GgufFile> read_gguf(const ByteSource& src, const GgufReadOptions& options = {});
Result<GgufFile> read_gguf_file(const std::string& path, const GgufReadOptions& options = {});

// Tokenizer token-id keys checked against the vocabulary by the reader.
const std::vector<std::string>& gguf_token_id_keys();

}  // namespace layerstream

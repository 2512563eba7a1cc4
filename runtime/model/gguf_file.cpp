#include "runtime/model/gguf_file.h"

#include <fmt/format.h>

#include <limits>

#include "runtime/core/status_macros.h"

namespace layerstream {

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status GgufFile::wrong_type(std::string_view key, const GgufValue& v, std::string_view expected) const {
  std::string actual = v.is_array() ? "ARRAY of " + gguf_type_name(v.array_type()) : gguf_type_name(v.type());
  return Status::Corruption(fmt::format("{}: metadata key '{}' has type {}; expected {}", path_, key, actual, expected));
}

namespace {
Status missing(const std::string& path, std::string_view key) {
  return Status::NotFound(fmt::format("{}: metadata key '{}' is missing", path, key));
}
}  // namespace

Result<const GgufValue*> GgufFile::find_typed(std::string_view key, bool (*accepts)(GgufType),
                                               std::string_view expected) const {
  const GgufValue* v = find(key);
  if (!v) return missing(path_, key);
  if (v->is_array() || !accepts(v->type())) return wrong_type(key, *v, expected);
  return v;
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  LS_ASSIGN_OR_RETURN(const GgufValue* v, find_typed(key, gguf_is_integer, "an integer"));
  return v->as_int();
}

Result<uint64_t> GgufFile::get_uint(std::string_view key) const {
  LS_ASSIGN_OR_RETURN(const GgufValue* v, find_typed(key, gguf_is_integer, "an unsigned integer"));
  if (v->type() == GgufType::kUint64) return v->raw_u64();
  const int64_t i = v->as_int();
  if (i < 0) return Status::Corruption(fmt::format("{}: metadata key '{}' = {} is negative", path_, key, i));
  return static_cast<uint64_t>(i);
}

Result<uint32_t> GgufFile::get_u32(std::string_view key) const {
  LS_ASSIGN_OR_RETURN(uint64_t v, get_uint(key));
  if (v > std::numeric_limits<uint32_t>::max()) {
    return Status::Corruption(fmt::format("{}: metadata key '{}' = {} exceeds the limit {}", path_, key, v,
                                          std::numeric_limits<uint32_t>::max()));
  }
  return static_cast<uint32_t>(v);
}

Result<double> GgufFile::get_float(std::string_view key) const {
  LS_ASSIGN_OR_RETURN(const GgufValue* v, find_typed(key, gguf_is_float, "FLOAT32 or FLOAT64"));
  return v->as_double();
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  LS_ASSIGN_OR_RETURN(const GgufValue* v, find_typed(key, [](GgufType t) { return t == GgufType::kBool; }, "BOOL"));
  return v->as_bool();
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  LS_ASSIGN_OR_RETURN(const GgufValue* v, find_typed(key, [](GgufType t) { return t == GgufType::kString; }, "STRING"));
  return v->as_string();
}

Result<const GgufValue*> GgufFile::get_array(std::string_view key, GgufType elem) const {
  const GgufValue* v = find(key);
  if (!v) return missing(path_, key);
  bool ok = v->is_array();
  if (ok) {
    if (elem == GgufType::kString) ok = v->array_type() == GgufType::kString;
    else if (gguf_is_integer(elem)) ok = gguf_is_integer(v->array_type());
    else if (gguf_is_float(elem)) ok = gguf_is_float(v->array_type());
    else ok = v->array_type() == elem;
  }
  if (!ok) return wrong_type(key, *v, "ARRAY of " + gguf_type_name(elem));
  return v;
}

Result<uint32_t> GgufFile::get_u32_or(std::string_view key, uint32_t fallback) const {
  return has(key) ? get_u32(key) : Result<uint32_t>(fallback);
}
Result<double> GgufFile::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : Result<double>(fallback);
}
Result<bool> GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : Result<bool>(fallback);
}
Result<std::string> GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : Result<std::string>(std::move(fallback));
}

}  // namespace layerstream

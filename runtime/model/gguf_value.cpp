#include "runtime/model/gguf_value.h"

#include <fmt/format.h>

#include "runtime/core/status_macros.h"

namespace layerstream {

std::string gguf_type_name(uint32_t id) {
  static const char* kNames[kGgufTypeCount] = {"UINT8", "INT8",   "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                              "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64", "FLOAT64"};
  if (id < kGgufTypeCount) return kNames[id];
  return "unknown value type " + std::to_string(id);
}

size_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    default: return 0;
  }
}

GgufValue GgufValue::scalar(GgufType t, const void* bytes, size_t n) {
  GgufValue v;
  v.type_ = t;
  v.raw_.assign(static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + n);
  return v;
}

GgufValue GgufValue::string(std::string s) {
  GgufValue v;
  v.type_ = GgufType::kString;
  v.str_ = std::move(s);
  return v;
}

GgufValue GgufValue::string_array(std::vector<std::string> s) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.elem_ = GgufType::kString;
  v.strings_ = std::move(s);
  return v;
}

GgufValue GgufValue::numeric_array(GgufType elem, std::vector<uint8_t> bytes) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.elem_ = elem;
  v.raw_ = std::move(bytes);
  return v;
}

GgufValue GgufValue::f32_array(const std::vector<float>& a) {
  std::vector<uint8_t> b(a.size() * 4);
  if (!a.empty()) std::memcpy(b.data(), a.data(), b.size());
  return numeric_array(GgufType::kFloat32, std::move(b));
}

GgufValue GgufValue::i32_array(const std::vector<int32_t>& a) {
  std::vector<uint8_t> b(a.size() * 4);
  if (!a.empty()) std::memcpy(b.data(), a.data(), b.size());
  return numeric_array(GgufType::kInt32, std::move(b));
}

namespace {
int64_t int_at(GgufType t, const uint8_t* p) {
  switch (t) {
    case GgufType::kUint8: return p[0];
    case GgufType::kInt8: return static_cast<int8_t>(p[0]);
    case GgufType::kBool: return p[0];
    case GgufType::kUint16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case GgufType::kInt16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case GgufType::kUint32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case GgufType::kInt32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case GgufType::kUint64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<int64_t>(v); }
    case GgufType::kInt64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    default: LS_CHECK_MSG(false, "not an integer GGUF type"); return 0;
  }
}
double double_at(GgufType t, const uint8_t* p) {
  if (t == GgufType::kFloat32) { float v; std::memcpy(&v, p, 4); return v; }
  if (t == GgufType::kFloat64) { double v; std::memcpy(&v, p, 8); return v; }
  LS_CHECK_MSG(false, "not a float GGUF type");
  return 0;
}
}  // namespace

uint64_t GgufValue::raw_u64() const {
  uint64_t v = 0;
  std::memcpy(&v, raw_.data(), std::min<size_t>(raw_.size(), 8));
  return v;
}
int64_t GgufValue::as_int() const { return int_at(type_, raw_.data()); }
double GgufValue::as_double() const { return double_at(type_, raw_.data()); }

uint64_t GgufValue::array_size() const {
  if (elem_ == GgufType::kString) return strings_.size();
  size_t es = gguf_scalar_size(elem_);
  return es ? raw_.size() / es : 0;
}
int64_t GgufValue::array_int(uint64_t i) const { return int_at(elem_, raw_.data() + i * gguf_scalar_size(elem_)); }
double GgufValue::array_double(uint64_t i) const {
  return double_at(elem_, raw_.data() + i * gguf_scalar_size(elem_));
}

std::string GgufValue::to_string() const {
  switch (type_) {
    case GgufType::kString: return str_.size() > 80 ? fmt::format("\"{}...\"", str_.substr(0, 77)) : "\"" + str_ + "\"";
    case GgufType::kArray: return fmt::format("[{} x {}]", gguf_type_name(elem_), array_size());
    case GgufType::kBool: return as_bool() ? "true" : "false";
    case GgufType::kFloat32: case GgufType::kFloat64: return fmt::format("{:g}", as_double());
    case GgufType::kUint64: return std::to_string(raw_u64());
    default: return std::to_string(as_int());
  }
}

}  // namespace layerstream

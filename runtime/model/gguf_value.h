// GGUF metadata values: the 13 value types of the format and one value
// (scalar, string, or a homogeneous array of scalars or strings).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {

// On-disk ids of gguf_type (docs/gguf.md); stable.
enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
inline constexpr uint32_t kGgufTypeCount = 13;

// "UINT32", "STRING", ...; "unknown value type N" for an id outside the table.
std::string gguf_type_name(uint32_t id);
inline std::string gguf_type_name(GgufType t) { return gguf_type_name(static_cast<uint32_t>(t)); }
// Bytes of one scalar on disk; 0 for STRING, ARRAY and unknown ids.
size_t gguf_scalar_size(GgufType t);
inline bool gguf_is_integer(GgufType t) {
  return t == GgufType::kUint8 || t == GgufType::kInt8 || t == GgufType::kUint16 || t == GgufType::kInt16 ||
         t == GgufType::kUint32 || t == GgufType::kInt32 || t == GgufType::kUint64 || t == GgufType::kInt64;
}
inline bool gguf_is_float(GgufType t) { return t == GgufType::kFloat32 || t == GgufType::kFloat64; }

// One metadata value. Scalars keep their raw little-endian bytes; numeric
// arrays keep the raw element bytes; string arrays keep the strings.
class GgufValue {
 public:
  GgufValue() = default;
  static GgufValue u8(uint8_t v) { return scalar(GgufType::kUint8, &v, 1); }
  static GgufValue i8(int8_t v) { return scalar(GgufType::kInt8, &v, 1); }
  static GgufValue u16(uint16_t v) { return scalar(GgufType::kUint16, &v, 2); }
  static GgufValue i16(int16_t v) { return scalar(GgufType::kInt16, &v, 2); }
  static GgufValue u32(uint32_t v) { return scalar(GgufType::kUint32, &v, 4); }
  static GgufValue i32(int32_t v) { return scalar(GgufType::kInt32, &v, 4); }
  static GgufValue u64(uint64_t v) { return scalar(GgufType::kUint64, &v, 8); }
  static GgufValue i64(int64_t v) { return scalar(GgufType::kInt64, &v, 8); }
  static GgufValue f32(float v) { return scalar(GgufType::kFloat32, &v, 4); }
  static GgufValue f64(double v) { return scalar(GgufType::kFloat64, &v, 8); }
  static GgufValue boolean(bool v) { uint8_t b = v ? 1 : 0; return scalar(GgufType::kBool, &b, 1); }
  static GgufValue string(std::string s);
  static GgufValue string_array(std::vector<std::string> v);
  // A numeric array from raw element bytes (bytes.size() == count * size of elem).
  static GgufValue numeric_array(GgufType elem, std::vector<uint8_t> bytes);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
  // A scalar from raw bytes (the parser uses this).
  static GgufValue scalar(GgufType t, const void* bytes, size_t n);

  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::kArray; }
  GgufType array_type() const { return elem_; }  // REQUIRES: is_array()

  // Scalar access. REQUIRES the matching kind (integer / float / bool / string).
  uint64_t raw_u64() const;  // the scalar's bits zero-extended
  int64_t as_int() const;    // any integer type, sign-extended when signed
  double as_double() const;  // FLOAT32 / FLOAT64
  bool as_bool() const { return raw_[0] != 0; }
  const std::string& as_string() const { return str_; }

  // Array access. REQUIRES: is_array().
  uint64_t array_size() const;
  int64_t array_int(uint64_t i) const;     // integer element types
  double array_double(uint64_t i) const;   // float element types
  const std::vector<std::string>& array_strings() const { return strings_; }
  const std::vector<uint8_t>& array_bytes() const { return raw_; }

  // Human-readable form for inspect and error messages; arrays are
  // abbreviated to their type and length.
  std::string to_string() const;

  bool operator==(const GgufValue& o) const {
    return type_ == o.type_ && elem_ == o.elem_ && raw_ == o.raw_ && str_ == o.str_ && strings_ == o.strings_;
  }

 private:
  GgufType type_ = GgufType::kUint8;
  GgufType elem_ = GgufType::kUint8;
  std::vector<uint8_t> raw_;          // scalar bytes, or numeric array elements
  std::string str_;                   // STRING
  std::vector<std::string> strings_;  // ARRAY of STRING
};

}  // namespace layerstream

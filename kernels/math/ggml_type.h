// GGML tensor types as GGUF stores them: ids, names, block geometry.
// The table covers every id GGUF defines so files are never misread: types we
// do not decode yet are known by name and rejected as unsupported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace layerstream {

// Ids from ggml.h `enum ggml_type` (stable on disk).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3,
  // 4, 5: Q4_2, Q4_3 (retired)
  Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  // 31-33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8 (retired)
  TQ1_0 = 34, TQ2_0 = 35,
  // 36-38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8 (retired)
  MXFP4 = 39,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;      // "Q8_0"
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
  bool supported;        // layerstream decodes and computes with it
};

// Traits of a known (non-retired) id, nullopt for an unknown or retired id.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t id);
// Traits of a type known to be valid.
GgmlTypeTraits ggml_type_traits(GgmlType type);
// "Q8_0"; "retired type id 4" / "unknown type id 99" for ids outside the table.
std::string ggml_type_name(uint32_t id);
// Parses a name, case-insensitive: "q8_0", "F16".
std::optional<GgmlType> parse_ggml_type(std::string_view name);

// Bytes of a row of `n` elements; REQUIRES n % block_elems == 0.
inline uint64_t ggml_row_bytes(const GgmlTypeTraits& t, uint64_t n) {
  return n / t.block_elems * t.block_bytes;
}

}  // namespace layerstream

// Row conversion between float32 and any supported GGUF type: the writer
// encodes with these and the CPU kernels / tests decode with them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"

namespace layerstream::math {

// Encodes n floats into `dst` (ggml_row_bytes(type, n) bytes).
// weights: n importance weights (an importance matrix row) steering the
// scale search (kquant_encode.h), or null. Q8_0 and the float types do not
// use them; Q4_0, Q4_1, Q5_0, Q5_1 round to nearest without them.
// Unsupported for types layerstream does not encode; InvalidArgument when n
// is not a multiple of the type's block size.
Status encode_row(GgmlType type, const float* src, size_t n, void* dst, const float* weights = nullptr);
// Decodes n elements of `type` from `src` into floats.
Status decode_row(GgmlType type, const void* src, size_t n, float* dst);

}  // namespace layerstream::math

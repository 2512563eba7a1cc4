// CUDA kernels for the Q5, K-quant and IQ4 types (kernels/math/kquant_blocks.h):
// the matvec for decode-sized batches, the dequantise-to-F16 step of the
// batched cuBLAS path, and the embedding gather. Each decodes whole 32-element
// sub-blocks with the shared math (dequantize_sub), so results are those of
// the CPU decoders. Called by matmul.cu / elementwise.cu for these types.
#pragma once

#include <cuda_runtime.h>

#include "kernels/kernels.h"

namespace layerstream::kernels::cuda {

// True for the types of kquant_blocks.h.
bool is_kquant_type(GgmlType t);
// y[t][o] for tokens [first_token, first_token + n_tok) (n_tok <= kMatvecMaxTokens).
Status launch_kquant_matvec(const MatmulParams& p, int64_t first_token, int n_tok, cudaStream_t s);
// w16[o * n_in + i] = f16(decode(w)[o][i]), or bf16 when to_bf16 (for a
// cuBLAS path that multiplies in BF16).
Status launch_kquant_dequant_16(const void* w, GgmlType type, int64_t n_out, int64_t n_in, bool to_bf16, uint16_t* w16,
                                cudaStream_t s);
Status launch_kquant_embedding(const EmbeddingParams& p, cudaStream_t s);

}  // namespace layerstream::kernels::cuda

// Q4_1 weights re-laid for the one-token matvec (decode): "x16", sixteen
// rows interleaved so that one 512-bit vector holds the same four elements
// of 16 rows, one lane per row.
//
// Why: in the GGUF layout a row's blocks sit one after another, so an
// integer dot product covers one row and its per-block scale must be spread
// over the lanes of that block (broadcasts, permutes and a horizontal sum per
// row). With a lane per row the scales of 16 rows are one vector load, the
// activation's 4 bytes are one broadcast shared by the 16 rows, and there is
// no horizontal sum: about a fifth of the instructions per weight byte.
//
// Layout: rows [16 g, 16 g + 16) keep their byte range of the GGUF matrix
// (16 row_bytes), and within it block k of the 16 rows is 320 bytes:
//   d[16] (f16), m[16] (f16), then for j = 0..3 the dword j of each row's
//   16 nibble bytes (qs[4 j .. 4 j + 3]), row r at 64 + 64 j + 4 r.
// The low nibbles of dword j are elements 4 j .. 4 j + 3 of the block, the
// high nibbles 16 + 4 j ..; rows past the last full group of 16 stay GGUF.
// Same size as the GGUF bytes. The packed copy is extra memory next to the
// GGUF bytes (which every other path keeps reading): see
// Kernels::packed_weight_bytes.
#pragma once

#include <cstdint>

#include "kernels/cpu/qdot.h"

namespace layerstream::kernels::cpu::q4_1x16 {

constexpr int64_t kRows = 16;
constexpr int64_t kMaxIn = 32768;  // the kernel keeps the activation's scales on its stack

// Whether the packed kernel runs on this CPU (AVX-512 VNNI) for rows n_in
// long (a multiple of 32, at most kMaxIn), n_out >= kRows.
bool available(int64_t n_out, int64_t n_in);

// Writes the packed form of the Q4_1 matrix w (n_out rows of n_in) to out
// (n_out * row_bytes bytes, not overlapping w). Portable C++.
void pack(const void* w, int64_t n_out, int64_t n_in, void* out);

// y[i] = row (r0 + i) . token xq for rows [r0, r1) of the packed matrix;
// r0 % 16 == 0 and r1 % 16 == 0 or r1 == n_out. Only where available().
void gemv(const void* packed, int64_t n_out, int64_t n_in, int64_t r0, int64_t r1, const QBlock* xq, float* y);

// The same products, bit for bit, from n_rows GGUF rows (rows in full
// groups of 16 from the first are transposed into the x16 lanes in
// registers; the rest take the row-major kernel, as in gemv). What decode
// uses for Q4_1 without a packed copy, so that a layer's placement does not
// change its bits. Only where available().
void gemv_gguf(const void* rows, int64_t n_rows, int64_t n_in, const QBlock* xq, float* y);

// gemv and gemv_gguf for n_tokens tokens at once (xq: n_in / 32 blocks per
// token; y[t * ldy + i]): each block of weights loaded once for up to four
// tokens, each token's products bit for bit its gemv / gemv_gguf ones (a
// batch-invariant verification pass, kernels.h). Only where available().
void gemm(const void* packed, int64_t n_out, int64_t n_in, int64_t r0, int64_t r1, const QBlock* xq, int64_t n_tokens,
          float* y, int64_t ldy);
void gemm_gguf(const void* rows, int64_t n_rows, int64_t n_in, const QBlock* xq, int64_t n_tokens, float* y,
               int64_t ldy);

}  // namespace layerstream::kernels::cpu::q4_1x16

// The fast CPU matmul: quantise the activations once per call (qdot.h), then
// integer block dot products over the weight rows in their GGUF blocks.
//
// Decode (one token): rows split over the pool, a few rows per pass over x.
// Q4_1 on AVX-512, whose one-token product has kernels of its own (x16):
// their multi-token form for passes of any size, which loads each block once
// for several tokens and gives every token its one-token bits. (The GEMM's
// tiles already sum each row and token as a one-token call does.)
// Prefill (several tokens): a cache-blocked GEMM. Each task owns a span of
// output rows and walks it in sub-spans of kRowBlock rows; for each sub-span
// the tokens go by in blocks whose quantised activations fit in L2, and the
// kernels' R x T register tiles reuse each loaded weight block for T tokens
// and each activation block for R rows. The weight sub-span stays in cache
// while all token blocks pass over it, so weights come from memory once.
// Where the CPU has AMX, prefill (16 tokens or more) of the types
// amx::gemm_fn covers goes to its tile GEMM (qgemm_amx.cpp) instead.
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/q4_1_packed.h"
#include "kernels/cpu/qdot.h"

namespace layerstream::kernels::cpu {
namespace {

constexpr int64_t kRowBlock = 64;               // rows per sub-span (multiple of every tile's R)
constexpr int64_t kTokenBlockBytes = 256 << 10;  // quantised activations per token block
constexpr int64_t kAmxMinTokens = 16;            // one AMX tile of tokens

// The AMX tile GEMM for `type`, when `isa` asks for it (kAmx) or allows it
// (kAuto: the CPU has it and LAYERSTREAM_CPU_ISA does not cap the ISA); else null.
QGemmFn amx_gemm(GgmlType type, CpuIsa isa) {
  static const bool auto_amx = amx::supported() && auto_isa() == CpuIsa::kAvx512 && !std::getenv("LAYERSTREAM_CPU_ISA");
  const bool on = isa == CpuIsa::kAmx ? amx::supported() : isa == CpuIsa::kAuto && auto_amx;
  return on ? amx::gemm_fn(type) : nullptr;
}

// Decode rows go to the pool in groups of 16: the packed Q4_1 kernel's
// unit (q4_1_packed.h) and a multiple of every row-major tile's R, so no
// chunk ends in a partial tile.
constexpr int64_t kGroup = q4_1x16::kRows;

// Whether `isa` runs the AVX-512 VNNI kernels here (what the packed layouts need).
bool avx512_isa(CpuIsa isa) {
  if (isa == CpuIsa::kAuto) return auto_isa() == CpuIsa::kAvx512;
  return (isa == CpuIsa::kAvx512 || isa == CpuIsa::kAmx) && avx512::vnni_supported();
}

// Whether p's product runs the x16 Q4_1 kernels (q4_1_packed.h): from its
// packed copy when it has one, else from the GGUF rows with the same bits
// (so resident and streamed layers agree). Passes of any size take them
// (unless AMX does), so every token gets its one-token bits: the row-major
// GEMM tiles sum Q4_1 in another order, and on AVX-512 they were also 1.5-3x
// slower for prefill than these (`layerstream bench --mode prefill`,
// SmolLM2-135M Q4_1, resident and streamed).
bool x16(const MatmulParams& p, CpuIsa isa) {
  return p.w_type == GgmlType::Q4_1 && avx512_isa(isa) && q4_1x16::available(p.n_out, p.n_in);
}

// Decode: the rows of n matmuls sharing the quantised tokens q (one job;
// n_tokens of them, nb blocks apart), each token by the one-token kernels.
// A product under ~32 KiB of weights (a few microseconds) runs on the
// calling thread, since handing it to a worker costs about as much as
// computing it. Larger ones go to the pool in chunks down to ~8 KiB (the
// pool's guided schedule starts large and ends there, so the threads finish
// within about half a microsecond of each other). The groups of the n
// matrices are numbered one after another; a chunk may span two matrices.
// Q4_1 on AVX-512 runs the x16 kernels (packed copy or not, same bits).
void decode_rows(const MatmulParams* ps, const QGemmFn* gemms, int n, const QBlock* q, ThreadPool* pool,
                 CpuIsa isa) {
  const int64_t n_tokens = ps[0].n_tokens, nb = ps[0].n_in / kQBlock;
  struct Seg {
    const uint8_t* w;
    const void* packed;  // x16: the packed copy, or null (then from the GGUF rows)
    bool x16;
    uint64_t row_bytes;
    int64_t n_out, g0, n_groups;
    float* y;
    QGemmFn gemm;
  };
  Seg segs[kMaxGroupedMatmuls];
  int64_t total = 0, bytes = 0;
  for (int i = 0; i < n; ++i) {
    const MatmulParams& p = ps[i];
    const uint64_t rb = ggml_row_bytes(ggml_type_traits(p.w_type), p.n_in);
    const int64_t groups = (p.n_out + kGroup - 1) / kGroup;
    const bool fast16 = x16(p, isa);
    segs[i] = {static_cast<const uint8_t*>(p.w), fast16 ? p.w_packed : nullptr, fast16, rb, p.n_out, total, groups,
               p.y, gemms[i]};
    total += groups;
    bytes += static_cast<int64_t>(rb) * p.n_out;
  }
  const int64_t n_in = ps[0].n_in;
  const auto run = [&](int64_t begin, int64_t end) {
    for (int i = 0; i < n; ++i) {
      const Seg& s = segs[i];
      const int64_t gb = std::max(begin, s.g0) - s.g0, ge = std::min(end, s.g0 + s.n_groups) - s.g0;
      if (gb >= ge) continue;
      const int64_t r0 = std::min(gb * kGroup, s.n_out), r1 = std::min(ge * kGroup, s.n_out);
      if (s.packed) {
        q4_1x16::gemm(s.packed, s.n_out, n_in, r0, r1, q, n_tokens, s.y + r0, s.n_out);
      } else if (s.x16) {
        q4_1x16::gemm_gguf(s.w + r0 * s.row_bytes, r1 - r0, n_in, q, n_tokens, s.y + r0, s.n_out);
      } else {
        for (int64_t t = 0; t < n_tokens; ++t)
          s.gemm(s.w + r0 * s.row_bytes, s.row_bytes, r1 - r0, q + t * nb, 1, n_in, s.y + t * s.n_out + r0, s.n_out);
      }
    }
  };
  if (bytes * n_tokens < 32768) {
    run(0, total);
  } else {
    const int64_t group_bytes = std::max<int64_t>(1, bytes / total);
    parallel_rows(pool, total, std::max<int64_t>(1, 8192 / group_bytes), run);
  }
}

}  // namespace

void matmul_fast_group(const MatmulParams* ps, int n, ThreadPool* pool, CpuIsa isa) {
  bool fused = n > 1 && n <= kMaxGroupedMatmuls && ps[0].n_tokens == 1 && ps[0].n_in % kQBlock == 0;
  QGemmFn gemms[kMaxGroupedMatmuls] = {};
  QuantizeFn quantize = nullptr;
  for (int i = 0; fused && i < n; ++i) {
    const QuantKernels k = quant_kernels(ps[i].w_type, isa);
    if (i == 0) quantize = k.quantize;
    // The same quantiser for all (it is per ISA today), so one q serves all.
    fused = k.gemm && k.quantize == quantize && ps[i].x == ps[0].x && ps[i].n_in == ps[0].n_in &&
            ps[i].n_tokens == 1;
    gemms[i] = k.gemm;
  }
  if (!fused) {
    for (int i = 0; i < n; ++i) matmul_fast(ps[i], pool, isa);
    return;
  }
  thread_local std::vector<QBlock> xq;
  const int64_t nb = ps[0].n_in / kQBlock;
  if (xq.size() < static_cast<size_t>(nb)) xq.resize(nb);
  quantize(ps[0].x, ps[0].n_in, xq.data());
  decode_rows(ps, gemms, n, xq.data(), pool, isa);
}

void matmul_fast(const MatmulParams& p, ThreadPool* pool, CpuIsa isa) {
  const QuantKernels k = quant_kernels(p.w_type, isa);
  if (!k.gemm || p.n_in % kQBlock != 0) {
    const bool float_type = p.w_type == GgmlType::F32 || p.w_type == GgmlType::F16 || p.w_type == GgmlType::BF16;
    if (float_type && p.n_tokens > kBatchInvariantTokens) {
      gemm_f32(p, pool, isa);
    } else {
      matmul(p, pool);
    }
    return;
  }
  const int64_t nb = p.n_in / kQBlock;
  // Per calling thread (the stream's host thread): grows to the largest pass.
  thread_local std::vector<QBlock> xq;
  if (xq.size() < static_cast<size_t>(p.n_tokens * nb)) xq.resize(p.n_tokens * nb);
  QBlock* q = xq.data();
  if (p.n_tokens >= 8) {
    parallel_rows(pool, p.n_tokens, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) k.quantize(p.x + t * p.n_in, p.n_in, q + t * nb);
    });
  } else {
    for (int64_t t = 0; t < p.n_tokens; ++t) k.quantize(p.x + t * p.n_in, p.n_in, q + t * nb);
  }

  const uint64_t row_bytes = ggml_row_bytes(ggml_type_traits(p.w_type), p.n_in);
  const auto* w = static_cast<const uint8_t*>(p.w);
  const int64_t n_groups = (p.n_out + kGroup - 1) / kGroup;
  const auto rows_of = [&](int64_t g) { return std::min(g * kGroup, p.n_out); };
  // The GEMM's tiles sum each (row, token) as its one-token call does, so
  // only the x16 Q4_1 products need the decode kernels for batch invariance.
  // AMX's tile GEMM is not held to that: it keeps its prefill speed.
  const QGemmFn tiles = p.n_tokens >= kAmxMinTokens ? amx_gemm(p.w_type, isa) : nullptr;
  if (!tiles && (p.n_tokens == 1 || x16(p, isa))) {
    decode_rows(&p, &k.gemm, 1, q, pool, isa);
    return;
  }
  if (tiles) {
    // AMX: tasks of whole 16-row panels (its B tile), all tokens per call
    // (each call repacks its rows once; the tokens go by 16 at a time).
    constexpr int64_t kPanel = 16;
    const int64_t n_panels = (p.n_out + kPanel - 1) / kPanel;
    parallel_rows(pool, n_panels, 4, [&](int64_t pb, int64_t pe) {
      const int64_t r0 = std::min(pb * kPanel, p.n_out), r1 = std::min(pe * kPanel, p.n_out);
      tiles(w + r0 * row_bytes, row_bytes, r1 - r0, q, p.n_tokens, p.n_in, p.y + r0, p.n_out);
    });
    return;
  }
  const int64_t token_block =
      std::max<int64_t>(4, kTokenBlockBytes / static_cast<int64_t>(nb * sizeof(QBlock)) / 4 * 4);
  parallel_rows(pool, n_groups, kRowBlock / kGroup, [&](int64_t gb, int64_t ge) {
    const int64_t begin = rows_of(gb), end = rows_of(ge);
    for (int64_t r = begin; r < end; r += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, end - r);
      for (int64_t t = 0; t < p.n_tokens; t += token_block) {
        const int64_t toks = std::min(token_block, p.n_tokens - t);
        k.gemm(w + r * row_bytes, row_bytes, rows, q + t * nb, toks, p.n_in, p.y + t * p.n_out + r, p.n_out);
      }
    }
  });
}

}  // namespace layerstream::kernels::cpu

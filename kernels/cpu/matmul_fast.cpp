// The fast CPU matmul: quantise the activations once per call (qdot.h), then
// integer block dot products over the weight rows in their GGUF blocks.
//
// Decode (one token): rows split over the pool, a few rows per pass over x.
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

}  // namespace

void matmul_fast(const MatmulParams& p, ThreadPool* pool, CpuIsa isa) {
  const QuantKernels k = quant_kernels(p.w_type, isa);
  if (!k.gemm || p.n_in % kQBlock != 0) {
    const bool float_type = p.w_type == GgmlType::F32 || p.w_type == GgmlType::F16 || p.w_type == GgmlType::BF16;
    if (float_type && p.n_tokens > 1) {
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
  // Rows go to the pool in groups of 4 (the kernels' register tiles), so no
  // chunk ends in a partial tile.
  constexpr int64_t kGroup = 4;
  const int64_t n_groups = (p.n_out + kGroup - 1) / kGroup;
  const auto rows_of = [&](int64_t g) { return std::min(g * kGroup, p.n_out); };
  if (p.n_tokens == 1) {
    // A product under ~32 KiB of weights (a few microseconds) runs on the
    // calling thread, since handing it to a worker costs about as much as
    // computing it. Larger ones go to the pool in chunks down to ~8 KiB (the
    // pool's guided schedule starts large and ends there, so the threads
    // finish within about half a microsecond of each other).
    const int64_t group_bytes = std::max<int64_t>(static_cast<int64_t>(row_bytes) * kGroup, 1);
    const auto run = [&](int64_t begin, int64_t end) {
      const int64_t r0 = rows_of(begin), r1 = rows_of(end);
      k.gemm(w + r0 * row_bytes, row_bytes, r1 - r0, q, 1, p.n_in, p.y + r0, p.n_out);
    };
    if (n_groups * group_bytes < 32768) {
      run(0, n_groups);
    } else {
      parallel_rows(pool, n_groups, std::max<int64_t>(1, 8192 / group_bytes), run);
    }
    return;
  }
  if (const QGemmFn tiles = p.n_tokens >= kAmxMinTokens ? amx_gemm(p.w_type, isa) : nullptr) {
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

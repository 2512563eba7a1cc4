#include "kernels/math/convert_row.h"

#include <cstring>
#include <string>

#include "kernels/math/fp16.h"
#include "kernels/math/kquant_blocks.h"
#include "kernels/math/kquant_encode.h"
#include "kernels/math/kquant_types.h"
#include "kernels/math/quant_blocks.h"
#include "runtime/core/status_macros.h"

namespace layerstream::math {
namespace {

Status check_shape(GgmlType type, size_t n) {
  const GgmlTypeTraits t = ggml_type_traits(type);
  if (!t.supported) {
    return Status::Unsupported(std::string("unsupported tensor type ") + t.name + " (id " +
                               std::to_string(static_cast<uint32_t>(type)) + ")");
  }
  if (n % t.block_elems != 0) {
    return Status::InvalidArgument("row of " + std::to_string(n) + " elements is not a multiple of the " +
                                   t.name + " block size " + std::to_string(t.block_elems));
  }
  return Status::OK();
}

template <typename Block, int Elems = kQK, typename Fn>
void encode_blocks(const float* src, size_t n, void* dst, Fn quantize) {
  auto* out = static_cast<Block*>(dst);
  for (size_t b = 0; b < n / Elems; ++b) {
    const Block blk = quantize(src + b * Elems);
    std::memcpy(out + b, &blk, sizeof(Block));
  }
}

template <typename Block>
void decode_blocks(const void* src, size_t n, float* dst) {
  const auto* in = static_cast<const Block*>(src);
  for (size_t b = 0; b < n / kQK; ++b) {
    Block blk;
    std::memcpy(&blk, in + b, sizeof(Block));
    dequantize_block(blk, dst + b * kQK);
  }
}

template <typename Block>
void decode_kblocks(const void* src, size_t n, float* dst) {
  const auto* in = static_cast<const Block*>(src);
  for (size_t b = 0; b < n / Block::kElems; ++b) {
    Block blk;
    std::memcpy(&blk, in + b, sizeof(Block));
    dequantize_kblock(blk, dst + b * Block::kElems);
  }
}

// The K-quant / Q5 / IQ4 encoders take the block's importance weights (or null).
template <typename Block, typename Fn>
void encode_kblocks(const float* src, size_t n, void* dst, const float* weights, Fn quantize) {
  auto* out = static_cast<Block*>(dst);
  for (size_t b = 0; b < n / Block::kElems; ++b) {
    const Block blk = quantize(src + b * Block::kElems, weights ? weights + b * Block::kElems : nullptr);
    std::memcpy(out + b, &blk, sizeof(Block));
  }
}

// The 32-element types with importance weights: each block also needs the
// mean of x^2 over the whole row (llama.cpp's sigma2).
template <typename Block, typename Fn>
void encode_weighted_blocks(const float* src, size_t n, void* dst, const float* weights, Fn quantize) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(src[i]) * src[i];
  const float sigma2 = static_cast<float>(sum / static_cast<double>(n));
  auto* out = static_cast<Block*>(dst);
  for (size_t b = 0; b < n / kQK; ++b) {
    const Block blk = quantize(src + b * kQK, weights + b * kQK, sigma2);
    std::memcpy(out + b, &blk, sizeof(Block));
  }
}

}  // namespace

Status encode_row(GgmlType type, const float* src, size_t n, void* dst, const float* weights) {
  LS_RETURN_IF_ERROR(check_shape(type, n));
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, n * 4); break;
    case GgmlType::F16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = f32_to_f16(src[i]);
      break;
    }
    case GgmlType::BF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(src[i]);
      break;
    }
    case GgmlType::Q8_0: encode_blocks<BlockQ8_0>(src, n, dst, quantize_block_q8_0); break;
    case GgmlType::Q4_0:
      if (weights) encode_weighted_blocks<BlockQ4_0>(src, n, dst, weights, quantize_block_q4_0_weighted);
      else encode_blocks<BlockQ4_0>(src, n, dst, quantize_block_q4_0);
      break;
    case GgmlType::Q4_1:
      if (weights) encode_weighted_blocks<BlockQ4_1>(src, n, dst, weights, quantize_block_q4_1_weighted);
      else encode_blocks<BlockQ4_1>(src, n, dst, quantize_block_q4_1);
      break;
    case GgmlType::Q5_0:
      if (weights) encode_weighted_blocks<BlockQ5_0>(src, n, dst, weights, quantize_block_q5_0_weighted);
      else encode_blocks<BlockQ5_0, BlockQ5_0::kElems>(src, n, dst, quantize_block_q5_0);
      break;
    case GgmlType::Q5_1:
      if (weights) encode_weighted_blocks<BlockQ5_1>(src, n, dst, weights, quantize_block_q5_1_weighted);
      else encode_blocks<BlockQ5_1, BlockQ5_1::kElems>(src, n, dst, quantize_block_q5_1);
      break;
    case GgmlType::Q2_K: encode_kblocks<BlockQ2_K>(src, n, dst, weights, quantize_block_q2_k); break;
    case GgmlType::Q3_K: encode_kblocks<BlockQ3_K>(src, n, dst, weights, quantize_block_q3_k); break;
    case GgmlType::Q4_K: encode_kblocks<BlockQ4_K>(src, n, dst, weights, quantize_block_q4_k); break;
    case GgmlType::Q5_K: encode_kblocks<BlockQ5_K>(src, n, dst, weights, quantize_block_q5_k); break;
    case GgmlType::Q6_K: encode_kblocks<BlockQ6_K>(src, n, dst, weights, quantize_block_q6_k); break;
    case GgmlType::IQ4_NL: encode_kblocks<BlockIQ4_NL>(src, n, dst, weights, quantize_block_iq4_nl); break;
    case GgmlType::IQ4_XS: encode_kblocks<BlockIQ4_XS>(src, n, dst, weights, quantize_block_iq4_xs); break;
    case GgmlType::MXFP4: encode_kblocks<BlockMXFP4>(src, n, dst, weights, quantize_block_mxfp4); break;
    default: return Status::Internal("encode_row: type marked supported but not handled");
  }
  return Status::OK();
}

Status decode_row(GgmlType type, const void* src, size_t n, float* dst) {
  LS_RETURN_IF_ERROR(check_shape(type, n));
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, n * 4); break;
    case GgmlType::F16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(in[i]);
      break;
    }
    case GgmlType::BF16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(in[i]);
      break;
    }
    case GgmlType::Q8_0: decode_blocks<BlockQ8_0>(src, n, dst); break;
    case GgmlType::Q4_0: decode_blocks<BlockQ4_0>(src, n, dst); break;
    case GgmlType::Q4_1: decode_blocks<BlockQ4_1>(src, n, dst); break;
    default: {
      // Q5, the K-quants and IQ4.
      const bool known =
          visit_kquant_type(type, [&](auto tag) { decode_kblocks<typename decltype(tag)::type>(src, n, dst); });
      if (!known) return Status::Internal("decode_row: type marked supported but not handled");
    }
  }
  return Status::OK();
}

}  // namespace layerstream::math

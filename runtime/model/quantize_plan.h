// What `layerstream quantize` makes of each tensor: the target (a llama.cpp
// file type such as Q4_K_M, or one tensor type for every matrix) and
// llama.cpp's per-tensor choices for it (src/llama-quant.cpp): which tensors
// are quantised at all, which keep more bits (attn_v, ffn_down, output), and
// the fallback for rows that are not a multiple of the type's block.
// Pure functions of the file's metadata and tensor list.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"
#include "runtime/model/gguf_file.h"

namespace layerstream {

// llama.cpp's file types (enum llama_ftype, written as general.file_type).
enum class LlamaFileType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 7, kQ5_0 = 8, kQ5_1 = 9,
  kQ2_K = 10, kQ3_K_S = 11, kQ3_K_M = 12, kQ3_K_L = 13, kQ4_K_S = 14, kQ4_K_M = 15,
  kQ5_K_S = 16, kQ5_K_M = 17, kQ6_K = 18, kIQ4_NL = 25, kIQ4_XS = 30, kBF16 = 32,
};

// What --type names.
struct QuantTarget {
  std::string name;         // "Q4_K_M", "Q4_K"
  GgmlType base;            // the type of most matrices
  uint32_t file_type;       // general.file_type written to the output
  bool mix;                 // a llama.cpp file type: its per-tensor rules apply
};

// "q4_k_m" (case-insensitive): every llama.cpp file type above by its name
// (q4_k_m, q4_k_s, q5_k_m, q5_k_s, q3_k_s/m/l, q2_k, q6_k, q8_0, q4_0, q4_1,
// q5_0, q5_1, iq4_nl, iq4_xs, f16, bf16, f32), then any other tensor type
// layerstream encodes (q3_k, q4_k, q5_k) for every matrix. nullopt otherwise.
std::optional<QuantTarget> parse_quant_target(std::string_view name);
// The names parse_quant_target accepts, for help and error text.
std::string quant_target_names();

struct PlanOptions {
  bool pure = false;         // every matrix at the base type, no mix rules, no fallback
  bool has_imatrix = false;  // changes llama.cpp's choice for ffn_down of IQ4/Q4_0/Q5_0
};

// The type of one tensor in the output, and why.
struct TensorPlan {
  GgmlType type;             // output type (== the input type: copied as is)
  bool convert = false;      // re-encoded (type differs from the input's)
  bool fallback = false;     // the rule's type could not hold the rows; llama.cpp's fallback chosen
};

// The output type of every tensor of `file`, in file order.
// InvalidArgument naming the tensor when --pure asks for a type whose block
// does not divide a tensor's row length ("cannot hold rows of N elements").
Result<std::vector<TensorPlan>> plan_quantization(const GgufFile& file, const QuantTarget& target,
                                                  const PlanOptions& options);

// What llama.cpp's rules read of a model besides its tensor list: its
// metadata (general.architecture, <arch>.block_count, attention.head_count,
// head_count_kv, expert_count).
struct QuantModelFacts {
  std::string arch;
  int n_layer = 0;
  int n_head = 0, n_head_kv = 0;
  int n_expert = 0;
};
QuantModelFacts quant_model_facts(const GgufFile& file);

// The same plan for a tensor list in file order (only names, shapes and
// types are read): a model not written yet, such as the example model's
// mixes, gets its types from these rules too.
Result<std::vector<TensorPlan>> plan_quantization(const QuantModelFacts& facts,
                                                  std::span<const GgufTensorInfo> tensors,
                                                  const QuantTarget& target, const PlanOptions& options);

// llama.cpp's type for rows of ne0 elements when `t`'s block does not divide
// them (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
// IQ4_XS -> IQ4_NL; F16 where that block does not divide them either).
GgmlType quant_fallback_type(GgmlType t, uint64_t ne0);

// Whether llama.cpp would quantise tensor `info` at all (2-D+ weights, not
// norms, router gates, position embeddings, ...).
bool tensor_is_quantizable(const GgufTensorInfo& info, std::string_view arch);

}  // namespace layerstream

// Importance matrices as llama.cpp's llama-imatrix writes them (GGUF): for
// each weight matrix W, the tensor "W.in_sum2" (F32, [ne0, n_mat]: the sum
// over the calibration tokens of each input activation squared, per expert
// matrix) and "W.counts" (F32, [1, n_mat]: how many tokens were summed), and
// the keys imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size.
// The importance of column j of matrix e is in_sum2[e][j] / counts[e] (1 when
// no token reached that expert), as llama-quantize computes it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {

struct ImportanceMatrix {
  // weight name ("blk.0.attn_q.weight") -> n_mat * ne0 importances (expert-major)
  std::unordered_map<std::string, std::vector<float>> entries;
  std::vector<std::string> datasets;
  uint32_t chunk_count = 0;
  uint32_t chunk_size = 0;

  // The importances of `name`, or null when the file has none for it.
  const std::vector<float>* find(std::string_view name) const;
};

// Reads an importance-matrix GGUF. IOError / Corruption from the GGUF
// reader; Corruption naming the entry when a sum has no count (or the other
// way round), a tensor is not F32, the sums are not a whole number of rows of
// the counts, or a value is negative or not finite; InvalidArgument when the
// file holds no entry or lacks imatrix.chunk_count / imatrix.chunk_size (as
// llama-quantize refuses it).
Result<ImportanceMatrix> read_imatrix_file(const std::string& path);

}  // namespace layerstream

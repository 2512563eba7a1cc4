// Collecting an importance matrix as llama.cpp's llama-imatrix does: for each
// weight matrix, per input column j the sum over every token row fed to it of
// x_j^2, and the number of rows; written as llama-imatrix's GGUF (the format
// imatrix.h reads: "<weight>.in_sum2" F32 [n_in, 1], "<weight>.counts" F32
// [1, 1], general.type "imatrix", imatrix.datasets / chunk_count /
// chunk_size), through GgufWriter (temporary file, renamed once complete).
//
// Thread safety: add() may be called from any thread (one lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "layerstream/status.h"
#include "runtime/model/gguf_file.h"

namespace layerstream {

struct ImatrixSums {
  std::vector<double> sum2;  // per input column: the sum of squares
  uint64_t count = 0;        // token rows summed
};

// What the file says of how it was made.
struct ImatrixFileInfo {
  std::vector<std::string> datasets;  // the calibration text files
  uint32_t chunk_count = 0;           // chunks processed
  uint32_t chunk_size = 0;            // tokens per chunk
};

class ImatrixCollector {
 public:
  // Adds the rows x [n_tokens][n_in] (n_in = each weight's row length) fed to
  // every matrix of `weights`. InvalidArgument when the weights' row lengths
  // differ or a weight had another row length before; Corruption naming the
  // weight when a sum stops being finite (as llama-imatrix refuses it).
  Status add(std::span<const GgufTensorInfo* const> weights, const float* x, int n_tokens);

  // The sums so far, by weight name (sorted: the order of the file).
  std::map<std::string, ImatrixSums> snapshot() const;

  // Writes the file (via path.tmp). InvalidArgument when nothing was
  // collected; OutOfBudget when it does not fit the disk; IOError from the
  // writer.
  Status write(const std::string& path, const ImatrixFileInfo& info) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, ImatrixSums> sums_;
};

// Refuses, before any work, an output the collector could not write: a
// folder, or a place where its temporary file cannot be created (IOError
// naming the path and the reason).
Status check_imatrix_output(const std::string& path);

}  // namespace layerstream

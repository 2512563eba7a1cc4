// Quantising a GGUF model file into another (`layerstream quantize`):
// tensor by tensor, a bounded number of rows at a time on every core, so a
// model larger than memory quantises in a few hundred MiB. Types per tensor
// from quantize_plan.h; encoders from kernels/math (llama.cpp's weighted
// scale searches, steered by an importance matrix when given).
//
// The output is written to "<out>.tmp" beside it and renamed only once every
// tensor was encoded, checked (every decoded value finite) and fsync'ed, and
// the finished file re-read and compared with the plan; on any error or
// cancellation nothing is left at <out> or <out>.tmp.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "layerstream/status.h"
#include "runtime/model/imatrix.h"
#include "runtime/model/quantize_plan.h"

namespace layerstream {

struct QuantizeProgress {
  uint64_t done_bytes = 0;   // input tensor bytes processed so far
  uint64_t total_bytes = 0;  // input tensor bytes in all
  size_t tensor = 0;         // index of the tensor being processed
  size_t n_tensors = 0;
  std::string name;          // its name
  GgmlType from = GgmlType::F32, to = GgmlType::F32;
  bool tensor_done = false;  // the call made once a tensor is complete
};

struct QuantizeOptions {
  QuantTarget target;
  bool pure = false;              // see PlanOptions
  bool allow_requantize = false;  // re-encode tensors that are already quantised
  const ImportanceMatrix* imatrix = nullptr;  // may be null
  std::string imatrix_path;       // recorded in the output's metadata
  unsigned threads = 0;           // 0: every core
  uint32_t alignment = 4096;      // general.alignment of the output (4096 streams with O_DIRECT)
  const std::atomic<bool>* cancel = nullptr;  // polled between row batches; stops with Cancelled
  std::function<void(const QuantizeProgress&)> progress;  // from the calling thread; may be empty
  bool fsync = true;
};

struct QuantizeReport {
  uint64_t in_bytes = 0, out_bytes = 0;  // file sizes
  size_t n_tensors = 0, n_converted = 0, n_fallback = 0, n_imatrix = 0;
};

// Errors: InvalidArgument when in and out are the same file, a tensor needs
// requantising without allow_requantize, the importance matrix has the wrong
// size for a tensor, or the plan refuses (quantize_plan.h); Unsupported for
// an input type layerstream cannot decode; OutOfBudget when the output does
// not fit the disk; IOError (read-only folder, disk full) from the writer;
// Cancelled; Corruption when an encoded value is not finite.
Result<QuantizeReport> quantize_model(const std::string& in_path, const std::string& out_path,
                                      const QuantizeOptions& options);

}  // namespace layerstream

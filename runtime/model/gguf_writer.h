// GgufWriter: builds a GGUF v3 file from metadata and tensor descriptions,
// then streams the tensor data to disk tensor by tensor, so the model is
// never held in memory.
//
// The file is written to "<path>.tmp" and renamed to <path> only after every
// byte was written and fsync'ed; on any failure or cancellation the
// temporary file is removed, so an interrupted run never leaves a file that
// looks complete. Not thread-safe; one writer per file.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/math/ggml_type.h"
#include "layerstream/status.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/gguf_value.h"

namespace layerstream {

// Receives one tensor's bytes in order; write() may be called any number of
// times but the total must equal the tensor's byte size.
class TensorSink {
 public:
  virtual ~TensorSink() = default;
  virtual Status write(const void* data, size_t n) = 0;
};

class GgufWriter {
 public:
  // alignment: general.alignment (written as a key when != 32). Power of two in 8..65536.
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);

  // Metadata, written in the order added. InvalidArgument on an empty or
  // duplicate key.
  Status add(std::string key, GgufValue value);
  // Declares a tensor (data supplied later, in declaration order).
  // InvalidArgument on a bad name, shape, or an ne0 not a multiple of the
  // type's block size; Unsupported for a type layerstream does not handle.
  Status add_tensor(std::string name, std::vector<uint64_t> dims, GgmlType type);

  const std::vector<GgufKeyValue>& metadata() const { return kvs_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // Layout of the file that write() will produce: its header (magic to the
  // last tensor info, before the alignment padding), where its data starts.
  std::vector<uint8_t> header() const;
  uint64_t data_offset() const;
  uint64_t file_size() const;

  // Called once per tensor, in declaration order, to produce its bytes.
  using FillFn = std::function<Status(size_t tensor_index, const GgufTensorInfo& info, TensorSink& sink)>;

  struct WriteOptions {
    // Polled between chunks; when it becomes true the write stops with
    // Cancelled and the temporary file is removed. May be null.
    const std::atomic<bool>* cancel = nullptr;
    // Called after each tensor with (bytes written so far, total bytes). May be empty.
    std::function<void(uint64_t, uint64_t)> progress;
    bool fsync = true;
  };
  Status write(const std::string& path, const FillFn& fill, const WriteOptions& options) const;
  Status write(const std::string& path, const FillFn& fill) const { return write(path, fill, WriteOptions{}); }

 private:
  uint32_t alignment_;
  std::vector<GgufKeyValue> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  uint64_t data_bytes_ = 0;  // padded size of the data section
};

// Serialises one value (type id not included) into `out`: the metadata encoding.
void gguf_encode_value(const GgufValue& v, std::vector<uint8_t>& out);

}  // namespace layerstream

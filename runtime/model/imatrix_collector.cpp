#include "runtime/model/imatrix_collector.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <filesystem>

#include "runtime/core/status_macros.h"
#include "runtime/model/disk_space.h"
#include "runtime/model/gguf_writer.h"

namespace layerstream {

Status ImatrixCollector::add(std::span<const GgufTensorInfo* const> weights, const float* x, int n_tokens) {
  if (weights.empty() || n_tokens <= 0) return Status::OK();
  const uint64_t n_in = weights[0]->dims[0];
  for (const GgufTensorInfo* w : weights) {
    if (w->dims[0] != n_in) {
      return Status::InvalidArgument(fmt::format("imatrix: '{}' has rows of {} where '{}' shares an input of {}",
                                                 w->name, w->dims[0], weights[0]->name, n_in));
    }
  }
  // The rows' squares once for the group, then into each weight's sums.
  std::vector<double> sq(n_in, 0.0);
  for (int t = 0; t < n_tokens; ++t) {
    const float* row = x + uint64_t(t) * n_in;
    for (uint64_t j = 0; j < n_in; ++j) sq[j] += double(row[j]) * double(row[j]);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const GgufTensorInfo* w : weights) {
    ImatrixSums& e = sums_[w->name];
    if (e.sum2.empty()) e.sum2.assign(n_in, 0.0);
    if (e.sum2.size() != n_in) {
      return Status::InvalidArgument(fmt::format("imatrix: '{}' was fed rows of {} before, now {}", w->name,
                                                 e.sum2.size(), n_in));
    }
    for (uint64_t j = 0; j < n_in; ++j) {
      e.sum2[j] += sq[j];
      if (!std::isfinite(e.sum2[j])) {
        return Status::Corruption(fmt::format("imatrix: the sum of squares of '{}' column {} is {} (the model's "
                                              "activations overflow)", w->name, j, e.sum2[j]));
      }
    }
    e.count += static_cast<uint64_t>(n_tokens);
  }
  return Status::OK();
}

std::map<std::string, ImatrixSums> ImatrixCollector::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sums_;
}

Status ImatrixCollector::write(const std::string& path, const ImatrixFileInfo& info) const {
  const std::map<std::string, ImatrixSums> sums = snapshot();
  if (sums.empty()) return Status::InvalidArgument("imatrix: no matmul input was collected: nothing to write");
  GgufWriter w;
  LS_RETURN_IF_ERROR(w.add("general.type", GgufValue::string("imatrix")));
  LS_RETURN_IF_ERROR(w.add("imatrix.datasets", GgufValue::string_array(info.datasets)));
  LS_RETURN_IF_ERROR(w.add("imatrix.chunk_count", GgufValue::u32(info.chunk_count)));
  LS_RETURN_IF_ERROR(w.add("imatrix.chunk_size", GgufValue::u32(info.chunk_size)));
  // Sorted by name, as llama-imatrix writes them; one matrix per weight (no experts).
  std::vector<std::vector<float>> data;
  for (const auto& [name, e] : sums) {
    LS_RETURN_IF_ERROR(w.add_tensor(name + ".in_sum2", {e.sum2.size(), 1}, GgmlType::F32));
    LS_RETURN_IF_ERROR(w.add_tensor(name + ".counts", {1, 1}, GgmlType::F32));
    data.emplace_back(e.sum2.begin(), e.sum2.end());
    data.push_back({static_cast<float>(e.count)});
  }
  LS_RETURN_IF_ERROR(check_free_disk(path, w.file_size(), "the importance matrix"));
  return w.write(path, [&](size_t i, const GgufTensorInfo&, TensorSink& sink) {
    return sink.write(data[i].data(), data[i].size() * sizeof(float));
  });
}

Status check_imatrix_output(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::InvalidArgument(fmt::format("the output {} is a folder: name a file such as {}/imatrix.gguf", path,
                                               path));
  }
  // The writer's own temporary file, created and removed again.
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("cannot write the importance matrix to " + path, errno);
  ::close(fd);
  ::unlink(tmp.c_str());
  return Status::OK();
}

}  // namespace layerstream

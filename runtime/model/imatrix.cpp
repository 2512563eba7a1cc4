#include "runtime/model/imatrix.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "runtime/core/status_macros.h"
#include "runtime/model/byte_source.h"
#include "runtime/model/gguf_file.h"

namespace layerstream {
namespace {

constexpr std::string_view kSums = ".in_sum2";
constexpr std::string_view kCounts = ".counts";

bool strip_suffix(std::string& s, std::string_view suffix) {
  if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  s.resize(s.size() - suffix.size());
  return true;
}

Result<std::vector<float>> read_f32(const ByteSource& src, const GgufTensorInfo& t) {
  if (t.type != GgmlType::F32) {
    return Status::Corruption(fmt::format("{}: imatrix tensor '{}' is {}, not F32", src.name(), t.name,
                                          ggml_type_traits(t.type).name));
  }
  std::vector<float> v(t.n_elements());
  LS_RETURN_IF_ERROR(src.read_at(t.offset, v.data(), v.size() * sizeof(float)));
  return v;
}

// Importances of one entry: sums / count per matrix (1 where nothing was counted).
Result<std::vector<float>> importances(const std::string& file, const std::string& name, std::vector<float> sums,
                                       const std::vector<float>& counts) {
  if (counts.empty() || sums.size() % counts.size() != 0) {
    return Status::Corruption(fmt::format("{}: imatrix entry '{}' has {} sums for {} counts (not whole rows)", file,
                                          name, sums.size(), counts.size()));
  }
  const size_t ne0 = sums.size() / counts.size();
  for (size_t e = 0; e < counts.size(); ++e) {
    const float c = std::round(counts[e]);
    for (size_t j = 0; j < ne0; ++j) {
      float& v = sums[e * ne0 + j];
      if (!std::isfinite(v) || v < 0) {
        return Status::Corruption(fmt::format("{}: imatrix entry '{}' has the value {} (expected a finite sum of squares)",
                                              file, name, v));
      }
      v = c > 0 ? v / c : 1.0f;
    }
  }
  return sums;
}

}  // namespace

const std::vector<float>* ImportanceMatrix::find(std::string_view name) const {
  auto it = entries.find(std::string(name));
  return it == entries.end() ? nullptr : &it->second;
}

Result<ImportanceMatrix> read_imatrix_file(const std::string& path) {
  LS_ASSIGN_OR_RETURN(auto src, FileByteSource::open(path));
  LS_ASSIGN_OR_RETURN(GgufFile f, read_gguf(*src));
  ImportanceMatrix m;
  if (!f.has("imatrix.chunk_count") || !f.has("imatrix.chunk_size")) {
    return Status::InvalidArgument(path + ": not an importance matrix (no imatrix.chunk_count / imatrix.chunk_size)");
  }
  LS_ASSIGN_OR_RETURN(m.chunk_count, f.get_u32("imatrix.chunk_count"));
  LS_ASSIGN_OR_RETURN(m.chunk_size, f.get_u32("imatrix.chunk_size"));
  if (f.has("imatrix.datasets")) {
    LS_ASSIGN_OR_RETURN(const GgufValue* ds, f.get_array("imatrix.datasets", GgufType::kString));
    m.datasets = ds->array_strings();
  }
  std::map<std::string, std::pair<const GgufTensorInfo*, const GgufTensorInfo*>> pairs;
  for (const auto& t : f.tensors()) {
    std::string name = t.name;
    if (strip_suffix(name, kSums)) pairs[name].first = &t;
    else if (strip_suffix(name, kCounts)) pairs[name].second = &t;
  }
  for (const auto& [name, p] : pairs) {
    if (!p.first || !p.second) {
      return Status::Corruption(fmt::format("{}: imatrix entry '{}' has {} but no {}", path, name,
                                            p.first ? kSums : kCounts, p.first ? kCounts : kSums));
    }
    LS_ASSIGN_OR_RETURN(std::vector<float> sums, read_f32(*src, *p.first));
    LS_ASSIGN_OR_RETURN(std::vector<float> counts, read_f32(*src, *p.second));
    LS_ASSIGN_OR_RETURN(m.entries[name], importances(path, name, std::move(sums), counts));
  }
  if (m.entries.empty()) return Status::InvalidArgument(path + ": the importance matrix holds no entry");
  return m;
}

}  // namespace layerstream

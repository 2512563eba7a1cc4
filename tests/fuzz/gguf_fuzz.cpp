// libFuzzer target: arbitrary bytes through the GGUF reader, and whatever
// parses through the Llama-family view and the tokenizer loader (the path a
// downloaded file takes before anything is read from its tensor data). Must
// never crash, hang, leak or trip a sanitizer; every rejection is a Status.
//
// Each input is parsed twice:
//  1. exactly as given (truncation, sizes against the real end of file);
//  2. as the header of a larger sparse file (the input followed by
//     kSparseTail zero bytes that are never materialised): the reader never
//     reads tensor data, so seeds cut to -max_len (the example models' tensor
//     data) still reach the Llama view and the tokenizer. The tail is just
//     big enough for the seed models (under 1 MiB): a larger one would let
//     metadata arrays legally span it, and each such input would spend
//     seconds reading zeros instead of finding bugs.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/byte_source.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

using namespace layerstream;

constexpr uint64_t kSparseTail = uint64_t{1} << 20;

// `bytes` followed by `tail` zero bytes; reads past `bytes` return zeros.
class SparseByteSource final : public ByteSource {
 public:
  SparseByteSource(const uint8_t* data, size_t size, uint64_t tail) : data_(data), size_(size), tail_(tail) {}
  uint64_t size() const override { return size_ + tail_; }
  const std::string& name() const override { return name_; }
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    if (offset > size() || n > size() - offset) {
      return Status::Corruption("sparse source: read past the end");
    }
    auto* out = static_cast<uint8_t*>(dst);
    size_t done = 0;
    if (offset < size_) {
      done = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
      std::memcpy(out, data_ + offset, done);
    }
    std::memset(out + done, 0, n - done);
    return Status::OK();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  uint64_t tail_;
  std::string name_ = "<sparse>";
};

void check_layers(const GgufFile& file, const LlamaModel& m) {
  // The view's promises: every layer's bytes lie inside the file, ranges are
  // sorted and disjoint, and the aligned span covers the span.
  if (m.layers.size() != m.blocks.size() + 2) std::abort();
  for (const ModelLayer& l : m.layers) {
    if (l.span_begin > l.span_end || l.span_end > file.file_size()) std::abort();
    if (l.aligned_begin > l.span_begin || l.aligned_end < l.span_end) std::abort();
    uint64_t prev_end = 0;
    for (const ByteRange& r : l.ranges) {
      if (r.begin < prev_end || r.begin >= r.end || r.end > file.file_size()) std::abort();
      prev_end = r.end;
    }
  }
}

void exercise(const ByteSource& src) {
  Result<GgufFile> file = read_gguf(src);
  if (!file.ok()) {
    if (file.status().message().empty()) std::abort();
    return;
  }
  for (const GgufTensorInfo& t : file->tensors()) {
    if (t.end() > file->file_size() || t.offset < file->data_offset()) std::abort();
  }
  Result<LlamaModel> model = load_llama_model(*file);
  if (model.ok()) {
    check_layers(*file, *model);
  } else if (model.status().message().empty()) {
    std::abort();
  }
  Result<TokenizerVocab> vocab = read_tokenizer_vocab(*file);
  if (!vocab.ok()) return;
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::create(std::move(*vocab));
  if (!tok.ok()) return;
  const std::vector<int32_t> ids = (*tok)->encode("Hello, world! <s> 1234 ünï", true, true);
  for (int32_t id : ids) {
    if (id < 0 || id >= (*tok)->vocab_size()) std::abort();
  }
  (void)(*tok)->decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MemoryByteSource exact(std::vector<uint8_t>(data, data + size), "<fuzz>");
  exercise(exact);
  SparseByteSource sparse(data, size, kSparseTail);
  exercise(sparse);
  return 0;
}

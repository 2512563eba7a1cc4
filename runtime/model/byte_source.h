// Random-access byte sources for the GGUF parser, and a small bounded
// buffered reader over them. The parser reads only through ByteSource so
// tests can feed it in-memory files; FileByteSource reads with pread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layerstream/status.h"

namespace layerstream {

// A read-only, fixed-size sequence of bytes addressed by absolute offset.
// Thread safety: read_at is safe to call concurrently on FileByteSource and
// MemoryByteSource (no shared cursor).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Total size in bytes (fixed for the lifetime of the source).
  virtual uint64_t size() const = 0;
  // A name for error messages (the file path, or "<memory>").
  virtual const std::string& name() const = 0;
  // Reads exactly n bytes at `offset` into dst. IOError on an OS failure;
  // Corruption when [offset, offset + n) is past the end.
  virtual Status read_at(uint64_t offset, void* dst, size_t n) const = 0;
};

// pread() over an open file descriptor (owned; closed on destruction).
class FileByteSource final : public ByteSource {
 public:
  // IOError naming the path when the file cannot be opened or stat'ed.
  static Result<std::unique_ptr<FileByteSource>> open(const std::string& path);
  ~FileByteSource() override;
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return path_; }
  Status read_at(uint64_t offset, void* dst, size_t n) const override;

 private:
  FileByteSource(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_;
  uint64_t size_;
};

// A byte vector held in memory (for tests and fuzzers).
class MemoryByteSource final : public ByteSource {
 public:
  explicit MemoryByteSource(std::vector<uint8_t> bytes, std::string name = "<memory>")
      : bytes_(std::move(bytes)), name_(std::move(name)) {}
  uint64_t size() const override { return bytes_.size(); }
  const std::string& name() const override { return name_; }
  Status read_at(uint64_t offset, void* dst, size_t n) const override;

 private:
  std::vector<uint8_t> bytes_;
  std::string name_;
};

// Sequential reads from a ByteSource through a fixed buffer (kBufferBytes),
// so parsing metadata costs few syscalls and bounded memory.
// Not thread-safe. The source must outlive the reader.
class BufferedReader {
 public:
  static constexpr size_t kBufferBytes = 64 * 1024;
  explicit BufferedReader(const ByteSource& src, uint64_t start = 0);

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return pos_ <= src_.size() ? src_.size() - pos_ : 0; }
  // Reads n bytes; Corruption "truncated ... reading <what> at byte N" when
  // fewer than n remain.
  Status read(void* dst, size_t n, const char* what);
  Status skip(uint64_t n, const char* what);

 private:
  Status truncated(size_t n, const char* what) const;
  const ByteSource& src_;
  uint64_t pos_;
  std::vector<uint8_t> buf_;
  uint64_t buf_start_ = 0;  // file offset of buf_[0]
  size_t buf_len_ = 0;      // valid bytes in buf_
};

}  // namespace layerstream
